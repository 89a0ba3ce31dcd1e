"""The kernel catalogue: what the analysis side knows about every registered kernel, read from
data/model/kernel-facts.json, so that predicting, comparing and the dashboard never import `kernels` (its registry
imports every kernel provider).

The file is generated from the kernel registry by `workbench kernel-facts` (kernels.fingerprint.catalogue() builds the
entries) and a CPU test fails when it differs from what the registry declares: the registry stays the one place a
kernel's facts are written, this file is their published copy. Pure Python; nothing here touches CUDA.

An entry holds the kernel's scheme, role, backend, the batch range and compute capabilities it runs at, its
`KernelFacts` (None for a kernel that declares none: the kernel tier leaves it NaN and says so) and the fingerprint of
its code (kernels.fingerprint; "" where its files are missing), which rows measured since carry in
`kernel_fingerprint`: a row whose fingerprint differs measures code that has changed since.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.errors import InputError
from models.kernel_terms import KernelFacts
from models.paths import catalogue_dir

CATALOGUE_SCHEMA_VERSION = 2  # 2: the code fingerprint
CATALOGUE_FILE = Path("model") / "kernel-facts.json"  # under the data directory
_ENTRY_FIELDS = ("scheme", "role", "backend", "m_min", "m_max", "min_cc", "max_cc", "facts", "fingerprint")
FINGERPRINT = re.compile(r"(?:[0-9a-f]{16})?")  # kernels.fingerprint's 16 hex digits, or "" (no code found)


@dataclass(frozen=True)
class KernelEntry:
    """One registered kernel as the analysis side sees it (no source, no runner)."""

    name: str
    scheme: str
    role: str  # "reference", "ladder", "optimized", "peer"
    backend: str  # "nvrtc", "cublas", "torch"
    m_min: int
    m_max: int
    min_cc: int
    max_cc: int | None
    facts: KernelFacts | None
    fingerprint: str = ""  # kernels.fingerprint of its code when the catalogue was published

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in _ENTRY_FIELDS}
        d["facts"] = dataclasses.asdict(self.facts) if self.facts is not None else None
        return d

    @classmethod
    def from_dict(cls, name: str, d: Any, where: str) -> KernelEntry:
        if not isinstance(d, dict) or set(d) != set(_ENTRY_FIELDS):
            raise InputError(f"{where}: kernel {name!r} must have exactly the fields {', '.join(_ENTRY_FIELDS)}")
        facts = d["facts"]
        if facts is not None:
            if not isinstance(facts, dict):
                raise InputError(f"{where}: kernel {name!r}: facts must be an object or null")
            try:
                facts = KernelFacts(**{k: _tuples(v) for k, v in facts.items()})
            except TypeError as exc:
                raise InputError(f"{where}: kernel {name!r}: facts not understood ({exc})") from None
            except InputError as exc:
                raise InputError(f"{where}: kernel {name!r}: {exc}") from None
        ints = {k: d[k] for k in ("m_min", "m_max", "min_cc")}
        if any(not isinstance(v, int) or isinstance(v, bool) for v in ints.values()) or not (
                d["max_cc"] is None or isinstance(d["max_cc"], int)):
            raise InputError(f"{where}: kernel {name!r}: m_min, m_max, min_cc must be integers, max_cc an integer "
                             "or null")
        if not isinstance(d["fingerprint"], str) or not FINGERPRINT.fullmatch(d["fingerprint"]):
            raise InputError(f"{where}: kernel {name!r}: fingerprint must be 16 lower-case hex digits or \"\"")
        return cls(name=name, scheme=str(d["scheme"]), role=str(d["role"]), backend=str(d["backend"]),
                   m_min=d["m_min"], m_max=d["m_max"], min_cc=d["min_cc"], max_cc=d["max_cc"], facts=facts,
                   fingerprint=d["fingerprint"])


def _tuples(v: Any) -> Any:
    """JSON lists back to the tuples KernelFacts holds (m_tiles, stream_k_ctas are tuples of pairs)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def catalogue_path(root: str | Path | None = None) -> Path:
    return (Path(root) if root is not None else catalogue_dir()) / CATALOGUE_FILE


def to_json(entries: dict[str, KernelEntry]) -> str:
    """The file's text: one kernel per line, sorted by name, one stable rendering (the test compares texts)."""
    rows = ",\n".join(f"  {json.dumps(name)}: {json.dumps(entries[name].to_dict())}" for name in sorted(entries))
    return (f'{{\n "schema_version": {CATALOGUE_SCHEMA_VERSION},\n'
            f' "generated_by": "workbench kernel-facts (from kernels.registry; do not edit by hand)",\n'
            f' "kernels": {{\n{rows}\n }}\n}}\n')


def parse(text: str, where: str) -> dict[str, KernelEntry]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not a readable kernel-facts JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != CATALOGUE_SCHEMA_VERSION:
        got = doc.get("schema_version") if isinstance(doc, dict) else None
        raise InputError(f"{where}: schema_version {got!r} not understood (this workbench reads "
                         f"{CATALOGUE_SCHEMA_VERSION})")
    kernels = doc.get("kernels")
    if not isinstance(kernels, dict):
        raise InputError(f"{where}: no 'kernels' object")
    return {name: KernelEntry.from_dict(name, d, where) for name, d in kernels.items()}


def load(path: str | Path | None = None) -> dict[str, KernelEntry]:
    """The catalogue at `path` (default: the shipped data/model/kernel-facts.json)."""
    path = Path(path) if path is not None else catalogue_path()
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"{path}: kernel facts not readable ({exc.strerror}); `workbench kernel-facts` writes "
                         "them from the kernel registry") from None
    return parse(text, str(path))


@functools.cache
def shipped() -> dict[str, KernelEntry]:
    """The shipped catalogue, read once per process."""
    return load()

"""The kernel catalogue (data/model/kernel-facts.json) is the registry's facts, published for the analysis side:
the shipped file must equal what the registry declares now, read back to the same entries, and refuse bad files."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kernels import registry
from models import kernel_catalogue as kc
from models.errors import InputError
from workbench.interfaces.cli import main


def test_shipped_file_is_what_the_registry_declares():
    from kernels.fingerprint import catalogue

    want = kc.to_json(catalogue())
    got = kc.catalogue_path().read_text()
    assert got == want, "data/model/kernel-facts.json is stale: run `workbench kernel-facts` and commit it"


def test_entries_round_trip_and_match_the_specs():
    from kernels.fingerprint import catalogue

    entries = kc.load()
    assert entries == catalogue()
    specs = {s.name: s for s in registry.specs()}
    assert set(entries) == set(specs)
    for name, e in entries.items():
        s = specs[name]
        assert (e.scheme, e.m_min, e.m_max, e.min_cc, e.max_cc, e.facts) == (s.scheme, s.m_min, s.m_max, s.min_cc,
                                                                            s.max_cc, s.facts)


def test_a_changed_tile_table_makes_the_file_stale():
    entries = registry.catalogue()
    name = next(n for n, e in entries.items() if e.facts is not None and e.facts.bn)
    changed = dict(entries)
    changed[name] = replace(entries[name], facts=replace(entries[name].facts, bn=entries[name].facts.bn * 2))
    assert kc.to_json(changed) != kc.catalogue_path().read_text()
    assert kc.parse(kc.to_json(changed), "x")[name].facts.bn == entries[name].facts.bn * 2


def test_kernel_tier_reads_the_catalogue_and_the_library_kernels():
    from models.library_kernels import LIBRARY
    from workbench.analysis.kernel_tier import kernel_facts

    registered = {n: e.facts for n, e in registry.catalogue().items() if e.facts is not None}
    assert kernel_facts() == {**{n: e.facts for n, e in LIBRARY.items()}, **registered}
    assert not set(LIBRARY) & set(registered)  # a modeled-only kernel never shadows a registered one


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema_version=99), "schema_version 99 not understood"),
    (lambda d: d.pop("kernels"), "no 'kernels' object"),
    (lambda d: next(iter(d["kernels"].values())).pop("m_max"), "must have exactly the fields"),
    (lambda d: next(iter(d["kernels"].values())).update(m_min="1"), "must be integers"),
    (lambda d: next(iter(d["kernels"].values()))["facts"].update(family="tpu"), "kernel family 'tpu' unknown"),
    (lambda d: next(iter(d["kernels"].values()))["facts"].update(colour=1), "facts not understood"),
    (lambda d: d["kernels"]["wg_fp8"]["facts"].update(bands=[[4096, 64]]), "bands must be"),
    (lambda d: d["kernels"]["wg_fp8"]["facts"].update(bands=d["kernels"]["wg_fp8"]["facts"]["bands"][::-1]),
     "ascending in N"),
    (lambda d: d["kernels"]["wg_fp8"]["facts"].update(bands=[[4096, 0, [[16, 16]]]]), "bands must be"),
    (lambda d: d["kernels"]["wg_fp8"]["facts"].update(bands=[[4096, 64, 7]]), "facts not understood"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, mutate, message):
    doc = json.loads(kc.catalogue_path().read_text())
    mutate(doc)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=message) as exc:
        kc.load(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a readable kernel-facts JSON"):
        kc.load(path)
    with pytest.raises(InputError, match="workbench kernel-facts"):
        kc.load(tmp_path / "missing.json")


def test_cli_writes_and_checks(tmp_path, capsys):
    out = tmp_path / "model" / "kernel-facts.json"
    assert main(["kernel-facts", "--check", "--out", str(out)]) == 1  # absent: differs
    assert not out.exists()
    assert main(["kernel-facts", "--out", str(out)]) == 0
    assert out.read_text() == kc.catalogue_path().read_text()
    assert main(["kernel-facts", "--check", "--out", str(out)]) == 0
    out.write_text(out.read_text().replace('"m_max": 16', '"m_max": 17', 1))
    assert main(["kernel-facts", "--check", "--out", str(out)]) == 1
    assert "differs from the kernel registry" in capsys.readouterr().err
    assert main(["kernel-facts", "--out", str(tmp_path / "facts.txt")]) == 2
    assert main(["kernel-facts", "--check"]) == 0  # the shipped file is current

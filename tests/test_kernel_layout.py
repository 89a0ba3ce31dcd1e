"""kernels/ by family: each .cu/.cuh is found by its bare file name (the name launchers, KernelSpec.source and
`#include` lines use), so names are unique across the family folders; the top level stays small; each family's
__init__ says what it holds; every registered nvrtc kernel's source is found."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from kernels import registry
from kernels.toolchain import build

KERNELS = Path(build.__file__).resolve().parents[1]


def test_cuda_file_names_are_unique_across_families():
    names = Counter(p.name for p in build.cuda_files())
    assert names and all(n == 1 for n in names.values()), [n for n, c in names.items() if c > 1]


def test_source_path_finds_every_cuda_file_and_refuses_an_unknown_name():
    for path in build.cuda_files():
        assert build.source_path(path.name) == path
    try:
        build.source_path("no_such_kernel.cu")
    except FileNotFoundError as exc:
        assert "no_such_kernel.cu" in str(exc)
    else:
        raise AssertionError("an unknown source name was accepted")


def test_every_folder_with_cuda_files_is_an_include_path():
    dirs = {p.parent for p in build.cuda_files()}
    assert len(dirs) > 1 and {f"-I{d}" for d in dirs} <= set(build.NVRTC_OPTIONS)


def test_every_registered_nvrtc_kernel_source_is_found():
    for spec in registry.specs():
        if spec.source:
            assert build.source_path(spec.source).is_file(), spec.name


def test_top_level_has_at_most_12_files_and_each_family_says_what_it_holds():
    top = [p for p in KERNELS.iterdir() if p.is_file()]
    assert len(top) <= 12, sorted(p.name for p in top)
    families = [d for d in KERNELS.iterdir() if d.is_dir() and d.name != "__pycache__"]
    assert len(families) >= 6
    for fam in families:
        init = fam / "__init__.py"
        assert init.is_file(), fam.name
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.splitlines()) == 3, f"{fam.name}/__init__.py: a three-line docstring"

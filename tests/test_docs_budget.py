"""docs/ holds text and small tables (issue 35): at most 300 KB in git, no file over 64 KB, no pictures.

Screenshots are made by scripts/dashboard_screenshots.py into the ignored screenshots/; raw device output (CSVs,
logs, profiler dumps) stays with the device call, the pages quote the numbers they cite and name the commit where a
raw file can still be read (docs/h200/README.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS_LIMIT_BYTES = 300_000
FILE_LIMIT_BYTES = 64_000
PICTURES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}


def tracked_docs() -> dict[str, int]:
    """Path -> size in bytes of every file git tracks under docs/ (skips outside a git checkout)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "docs"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    paths = [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]
    assert paths, "git tracks no file under docs/"
    return {p: (ROOT / p).stat().st_size for p in paths}


def _largest(sizes: dict[str, int], n: int = 5) -> str:
    return ", ".join(f"{p} {s / 1000:.0f} KB" for p, s in sorted(sizes.items(), key=lambda kv: -kv[1])[:n])


def test_docs_stay_under_their_budget():
    sizes = tracked_docs()
    total = sum(sizes.values())
    assert total <= DOCS_LIMIT_BYTES, f"docs/ holds {total / 1000:.0f} KB in git (limit 300): {_largest(sizes)}"


def test_no_doc_file_is_a_dump_or_a_picture():
    sizes = tracked_docs()
    big = {p: s for p, s in sizes.items() if s > FILE_LIMIT_BYTES}
    assert not big, f"files over 64 KB in docs/ (keep the table the text cites, name the commit of the rest): {big}"
    pictures = [p for p in sizes if Path(p).suffix.lower() in PICTURES]
    assert not pictures, f"pictures in docs/ (scripts/dashboard_screenshots.py makes them, untracked): {pictures}"

"""Drop members from a wheel (and their RECORD lines), in place: `python3 scripts/slim_wheel.py WHEEL [PREFIX...]`.

Ray's wheel (79 MB for 2.60.0) is over the 64 MiB a device call may carry; 31 MiB of it are the Java worker's jars
(`ray/jars/`), which a Python-only Ray never loads. The default PREFIX drops them (48 MiB left).
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path


def slim(wheel: Path, prefixes: list[str]) -> tuple[int, int]:
    """Rewrite `wheel` without the members under `prefixes`; returns (bytes before, bytes after)."""
    before = wheel.stat().st_size
    fd, tmp = tempfile.mkstemp(suffix=".whl", dir=wheel.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                name = info.filename
                if any(name.startswith(p) for p in prefixes):
                    continue
                data = src.read(info)
                if name.endswith(".dist-info/RECORD"):
                    lines = data.decode().splitlines(keepends=True)
                    data = "".join(line for line in lines if not any(line.startswith(p) for p in prefixes)).encode()
                dst.writestr(info, data)
        os.replace(tmp, wheel)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return before, wheel.stat().st_size


def main(argv: list[str]) -> int:
    if not argv or not argv[0].endswith(".whl"):
        print("usage: python3 scripts/slim_wheel.py WHEEL.whl [PREFIX ...]  (default prefix: ray/jars/)",
              file=sys.stderr)
        return 2
    before, after = slim(Path(argv[0]), argv[1:] or ["ray/jars/"])
    print(f"{argv[0]}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

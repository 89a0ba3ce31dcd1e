"""Compile every tensor-core source x variant (and the GEMV test configs) in parallel, filling CuPy's disk cache.

Device machine: `python3 bench/prewarm_tc.py [--with-gemv]` before the GPU tests or a benchmark, so neither pays
NVRTC serially.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    import bench_gemv

    from kernels import tensorcore

    jobs = {(s.source, v.options) for s in tensorcore.SPECS for v in tensorcore.VARIANTS.values()}
    if "--with-gemv" in sys.argv[1:]:
        jobs |= bench_gemv.test_jobs()
    bench_gemv.prewarm(jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

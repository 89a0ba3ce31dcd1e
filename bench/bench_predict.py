"""Benchmark of the vectorized roofline: models.roofline.predict over 10^4 .. 10^6 points (target: 10^5 well under 1 s).

Run: python bench/bench_predict.py
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from models.hardware import load_gpus
from models.roofline import predict
from models.schemes import SCHEME_NAMES


def points(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    gpus = list(load_gpus())
    return pd.DataFrame({
        "gpu": rng.choice(gpus, n),
        "scheme": rng.choice(list(SCHEME_NAMES), n),
        "M": rng.integers(1, 257, n),
        "N": rng.choice([4096, 12288, 22016, 28672], n),
        "K": rng.choice([4096, 8192, 11008, 14336], n),
    })


def main() -> None:
    print(f"{'points':>10} {'best of 3':>12} {'per point':>12}")
    for n in (10_000, 100_000, 1_000_000):
        df = points(n)
        best = min(_timed(df) for _ in range(3))
        print(f"{n:>10,} {best * 1e3:>10.1f} ms {best / n * 1e9:>9.0f} ns")


def _timed(df: pd.DataFrame) -> float:
    start = time.perf_counter()
    predict(df)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()

"""Measured-SHAPED synthetic rows for the dashboard's tests and benchmark (written only to temp dirs, never data/).

Times are the datasheet prediction times a per-kernel slowdown and noise, so figures have plausible shapes; they are
not measurements and are never stored in the repository.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

KERNELS = (  # name, scheme, role, backend, slowdown at M=1, extra slowdown per doubling of M
    ("cublas_bf16", "bf16", "peer", "cublas", 1.12, 0.00),
    ("gemv_bf16", "bf16", "optimized", "nvrtc", 1.10, 0.02),
    ("gemv_fp32", "fp32", "reference", "nvrtc", 1.08, 0.00),
    ("gemv_w8a16", "w8a16", "optimized", "nvrtc", 1.30, 0.10),
    ("gemv_w4a16", "w4a16", "optimized", "nvrtc", 1.60, 0.35),
    ("torch_fp8", "fp8", "peer", "torch", 1.50, 0.02),
    ("torch_int8", "w8a8", "peer", "torch", 1.60, 0.03),
)
SHAPES = ((22016, 4096), (12288, 4096), (4096, 11008), (4096, 4096))
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def synthetic_measurements(
    n_rows: int = 0, gpus: tuple[str, ...] = ("h200-sxm",), modes: tuple[str, ...] = ("cold",), seed: int = 0
) -> pd.DataFrame:
    """One full sweep (kernels × shapes × batches × modes × GPUs), repeated as runs until n_rows (0 = one sweep)."""
    from models.hardware import load_gpus
    from models.roofline import predict
    from workbench.storage.schema import ADDED_COLUMNS, MEASUREMENT_COLUMNS, SCHEMA_VERSION
    from workbench.storage.store import validate_frame

    rng = np.random.default_rng(seed)
    grid = pd.MultiIndex.from_product(
        [list(gpus), range(len(KERNELS)), range(len(SHAPES)), BATCHES, list(modes)],
        names=["gpu", "k", "s", "M", "mode"],
    ).to_frame(index=False)
    runs = max(1, -(-n_rows // len(grid))) if n_rows else 1
    frame = pd.concat([grid.assign(run=r) for r in range(runs)], ignore_index=True)
    if n_rows:
        frame = frame.iloc[:n_rows]
    kernel = np.array(KERNELS, dtype=object)[frame["k"].to_numpy()]
    shape = np.array(SHAPES)[frame["s"].to_numpy()]
    points = pd.DataFrame(
        {"gpu": frame["gpu"], "scheme": kernel[:, 1], "M": frame["M"], "N": shape[:, 0], "K": shape[:, 1]}
    )
    pred = predict(points)
    slow = kernel[:, 4].astype(float) * (1 + kernel[:, 5].astype(float) * np.log2(frame["M"].to_numpy()))
    slow = slow * (1 + 0.02 * rng.standard_normal(len(frame)))
    median = pred["time_datasheet_s"].to_numpy() * slow
    if (frame["mode"] == "hot").any():
        median = np.where(frame["mode"] == "hot", median * 0.8, median)
    n = len(frame)
    catalogue = load_gpus()
    names = np.array([catalogue[g].name for g in frame["gpu"]], dtype=object)
    throttled = rng.random(n) < 0.03
    sm_clock = np.where(throttled, 1.70e9, 1.98e9) * (1 + 0.002 * rng.standard_normal(n))
    rows = {
        "schema_version": np.full(n, SCHEMA_VERSION),
        "run_id": ("run-" + frame["run"].astype(str)).to_numpy(),
        "timestamp": pd.Timestamp("2026-12-02T10:00:00Z").isoformat() + frame.index.astype(str).to_numpy(),
        "gpu_name": names,
        "gpu_key": frame["gpu"].to_numpy(),
        "gpu_uuid": "GPU-synthetic-" + frame["gpu"].to_numpy(),
        "compute_capability": np.full(n, "9.0"),
        "sm_count": np.full(n, 132),
        "l2_bytes": np.full(n, 60 * 2**20),
        "mem_total_bytes": np.full(n, 141 * 2**30),
        "driver_version": np.full(n, "580.0"),
        "cuda_runtime": np.full(n, "13.0"),
        "cupy_version": np.full(n, "14.2"),
        "torch_version": np.full(n, "2.11"),
        "git_commit": np.full(n, "synthetic"),
        "scheme": kernel[:, 1],
        "kernel": kernel[:, 0],
        "backend": kernel[:, 3],
        "role": kernel[:, 2],
        "layer": np.full(n, ""),
        "M": frame["M"].to_numpy(),
        "N": shape[:, 0],
        "K": shape[:, 1],
        "group_size": np.where(kernel[:, 1] == "w4a16", 128, 0),
        "bytes": pred["bytes"].to_numpy(),
        "flops": pred["flops"].to_numpy(),
        "mode": frame["mode"].to_numpy(),
        "rotate_sets": np.full(n, 4),
        "rotate_bytes": pred["weight_bytes"].to_numpy() * 4,
        "n_samples": np.full(n, 20),
        "launches_per_sample": np.full(n, 50),
        "timer": np.full(n, "graph"),
        "time_median_s": median,
        "time_p10_s": median * 0.985,
        "time_p90_s": median * 1.02,
        "time_min_s": median * 0.98,
        "time_mean_s": median * 1.002,
        "spread_rel": np.full(n, 0.035),
        "time_single_call_s": median + 5e-6,
        "sm_clock_min_hz": sm_clock * 0.99,
        "sm_clock_median_hz": sm_clock,
        "mem_clock_median_hz": np.full(n, 3.201e9),
        "power_median_w": 300 + 300 * rng.random(n),
        "temperature_max_c": 45 + 20 * rng.random(n),
        "clock_reasons": np.where(throttled, "sw_power_cap", ""),
        "throttled": throttled,
        "calibration_sm_clock_hz": np.full(n, 1.98e9),
        "ref_error_rel": 1e-4 * rng.random(n),
        "ref_maxabs_rel": 1e-3 * rng.random(n),
        "quant_error_rel": np.where(kernel[:, 1] == "w4a16", 0.05, np.nan),
    }
    assert set(rows) <= set(MEASUREMENT_COLUMNS) and set(MEASUREMENT_COLUMNS) - set(rows) <= set(ADDED_COLUMNS)
    return validate_frame(pd.DataFrame(rows), "synthetic")


def write_dataset(data_dir: Path, frame: pd.DataFrame, name: str = "synthetic.parquet") -> Path:
    """A data dir (measurements/ + empty calibration/ and hypotheses/) holding `frame`, written by the store."""
    from workbench.storage.store import write_points

    for sub in ("measurements", "calibration", "hypotheses"):
        (data_dir / sub).mkdir(parents=True, exist_ok=True)
    return write_points(data_dir / "measurements" / name, frame)

"""Measured-shaped fixtures for the comparison / hypotheses tests: DataFrames with every MEASUREMENT_COLUMNS column,
built in memory (never files in data/measurements/), and a calibration document in the store's format."""

from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.storage.schema import MEASUREMENT_COLUMNS, SCHEMA_VERSION

GPU = "h200-sxm"
CAL_CLOCK = 1.98e9


def point(kernel: str, scheme: str, M: int, t: float, *, N: int = 4096, K: int = 4096, spread: float = 0.0,
          role: str = "optimized", gpu: str = GPU, throttled: bool | None = False, clock: float = CAL_CLOCK,
          mode: str = "cold", timestamp: str = "2026-12-02T12:00:00Z", **extra: Any) -> dict[str, Any]:
    """One measured row: median t, p10/p90 = t·(1 ∓ spread)."""
    row: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "run_id": "test", "timestamp": timestamp, "gpu_name": "NVIDIA H200",
        "gpu_key": gpu, "gpu_uuid": "GPU-0000", "compute_capability": "9.0", "sm_count": 132, "l2_bytes": 62914560,
        "mem_total_bytes": 141 * 10**9, "driver_version": "580", "cuda_runtime": "13.0", "cupy_version": "14.2",
        "torch_version": "", "git_commit": "abc", "scheme": scheme, "kernel": kernel,
        "backend": "cublas" if kernel.startswith("cublas") else "nvrtc", "role": role, "layer": "", "M": M, "N": N,
        "K": K, "group_size": 128 if scheme == "w4a16" else 0, "bytes": float("nan"), "flops": 2.0 * M * N * K,
        "mode": mode, "rotate_sets": 4, "rotate_bytes": 3e8, "n_samples": 20, "launches_per_sample": 50,
        "time_median_s": t, "time_p10_s": t * (1 - spread), "time_p90_s": t * (1 + spread), "time_min_s": t * 0.99,
        "time_mean_s": t, "spread_rel": 2 * spread, "time_single_call_s": t * 2, "sm_clock_min_hz": clock,
        "sm_clock_median_hz": clock, "mem_clock_median_hz": 3.2e9, "power_median_w": 500.0,
        "temperature_max_c": 60.0, "clock_reasons": "", "throttled": throttled, "calibration_sm_clock_hz": CAL_CLOCK,
        "ref_error_rel": 1e-4, "ref_maxabs_rel": 1e-3, "quant_error_rel": float("nan"),
    }  # fmt: skip
    row.update(extra)
    return row


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a measurement frame in schema order; a schema column the rows lack gets a neutral value."""
    df = pd.DataFrame(rows)
    neutral = {"string": "", "int64": 0, "float64": float("nan"), "boolean": pd.NA}
    for col, dtype in MEASUREMENT_COLUMNS.items():
        if col not in df.columns:
            df[col] = neutral[dtype]
    df = df[list(MEASUREMENT_COLUMNS) + [c for c in df.columns if c not in MEASUREMENT_COLUMNS]]
    df["throttled"] = df["throttled"].astype("boolean")
    return df


def calibration(read: float = 4.4e12, floor: float = 2e-6, bf16: float = 640e12, gpu: str = GPU) -> dict[str, Any]:
    """A calibration document as `workbench calibrate` writes it (store format)."""
    return {
        "schema_version": SCHEMA_VERSION, "gpu_name": "NVIDIA H200", "gpu_key": gpu, "gpu_uuid": "GPU-0000",
        "timestamp": "2026-12-02T11:00:00Z", "sm_clock_hz": CAL_CLOCK, "mem_clock_hz": 3.2e9, "environment": {},
        "ceilings": {
            "read_bytes_per_s": read, "copy_bytes_per_s": 4.2e12, "l2_bytes_per_s": 1e13, "launch_floor_s": 4e-6,
            "graph_launch_floor_s": floor, "fp32_flops_per_s": 50e12, "fp32_flops": 50e12, "fp16_mma_flops": bf16,
            "bf16_mma_flops": bf16, "int8_mma_ops": 2 * bf16, "fp8_mma_flops": 0.77 * bf16,
            "cublas_fp16_flops": 740e12, "fp8_mma_emulated": True,
        },
    }  # fmt: skip

"""Column contracts shared by the profiler (writer), the store, the comparison layer and the dashboard.

All quantities are SI floats: seconds, bytes, FLOP (or integer ops), hertz, watts. Formatting happens only in the
CLI and the UI. Bump SCHEMA_VERSION when a column changes meaning; readers reject newer versions.
"""

from __future__ import annotations

from models.kernel_terms import CLUSTER_PIECES_MAX, resident_clusters_key

SCHEMA_VERSION = 1

# One row per measured point, as written by `workbench profile` (data/measurements/**/*.parquet).
MEASUREMENT_COLUMNS: dict[str, str] = {
    "schema_version": "int64",
    "run_id": "string",  # one id per sweep invocation (a resumed sweep keeps its id)
    "timestamp": "string",  # ISO 8601, UTC, when the point finished
    # environment
    "gpu_name": "string",  # as the device reports it, e.g. "NVIDIA H200"
    "gpu_key": "string",  # catalogue key in data/gpus.toml, e.g. "h200-sxm" ("" if not in the catalogue)
    "gpu_uuid": "string",
    "compute_capability": "string",  # "9.0"
    "sm_count": "int64",
    "l2_bytes": "int64",
    "mem_total_bytes": "int64",
    "driver_version": "string",
    "cuda_runtime": "string",
    "cupy_version": "string",
    "torch_version": "string",  # "" when torch was not importable
    "git_commit": "string",
    # kernels.fingerprint of the kernel's code (CUDA sources, launcher) when measured; "" in rows written before it
    # (ADDED_COLUMNS): `workbench stale` then reads the code at `git_commit`
    "kernel_fingerprint": "string",
    # what was measured
    "scheme": "string",  # models.schemes name
    "kernel": "string",  # kernels registry name
    "backend": "string",  # "nvrtc" (ours), "cublas" (CuPy), "torch"
    "role": "string",  # "reference" (the chapter's before), "ladder" (kernels/gemv/ladder.py), "optimized", "peer"
    "layer": "string",  # e.g. "llama-2-7b/gate_up", "" for a bare --shape
    "M": "int64",
    "N": "int64",
    "K": "int64",
    "group_size": "int64",  # 0 where the scheme has no groups
    # MoE expert layers (workbench profile --moe; ADDED_COLUMNS: the dense defaults, filled in for older files)
    "experts": "int64",  # E of a grouped expert layer; 1 for a dense layer
    "top_k": "int64",  # experts per token; 1 for a dense layer
    "routing": "string",  # models.moe.Routing.label ("uniform", "zipf:1", "histogram:FILE"); "" for a dense layer
    "routing_seed": "int64",  # the seed models.moe.draw drew the measured routing with; 0 for a dense layer
    "touched_experts": "int64",  # distinct experts the measured routing reads; 1 for a dense layer
    "busiest_rows": "int64",  # rows (tokens) of the measured routing's busiest expert; M for a dense layer
    "bytes": "float64",  # models.schemes accounting for (scheme, M, N, K)
    "flops": "float64",  # 2*M*N*K
    # timing
    "mode": "string",  # "cold" (rotating input sets >= 3x L2) or "hot" (one set)
    "rotate_sets": "int64",
    "rotate_bytes": "float64",  # total bytes of the rotated input sets
    "n_samples": "int64",
    "launches_per_sample": "int64",
    "timer": "string",  # "graph" (CUDA graph of back-to-back launches, replayed) or "events" (eager launches)
    "time_median_s": "float64",  # per launch
    "time_p10_s": "float64",
    "time_p90_s": "float64",
    "time_min_s": "float64",
    "time_mean_s": "float64",
    "spread_rel": "float64",  # (p90 - p10) / median
    "time_single_call_s": "float64",  # one launch incl. host dispatch, between two events
    # clocks (NVML; NaN / "" when NVML is absent)
    "sm_clock_min_hz": "float64",
    "sm_clock_median_hz": "float64",
    "mem_clock_median_hz": "float64",
    "power_median_w": "float64",
    "temperature_max_c": "float64",
    "clock_reasons": "string",  # union of active clock-event reasons, comma-separated names, "" if none
    "throttled": "boolean",  # reasons set or SM clock < 90% of the calibration clock; <NA> without NVML
    "calibration_sm_clock_hz": "float64",
    # correctness (float64 reference on the dequantized weights)
    "ref_error_rel": "float64",  # ||y - ref||_2 / ||ref||_2  (kernel error)
    "ref_maxabs_rel": "float64",  # max|y - ref| / max|ref|
    "quant_error_rel": "float64",  # ||ref_dequant - ref_float||_2 / ||ref_float||_2 (quantization error), NaN if n/a
}

# Columns added after version 1 without a change of meaning (so without a version bump): the value a row written
# before them gets (a dense point); None: the row's M.
ADDED_COLUMNS: dict[str, object] = {"kernel_fingerprint": "", "experts": 1, "top_k": 1, "routing": "",
                                    "routing_seed": 0, "touched_experts": 1, "busiest_rows": None}

# Calibration file: data/calibration/<gpu_key or name>-<uuid[:8]>.json, written by `workbench calibrate`.
# Top-level keys: schema_version, gpu_name, gpu_key, gpu_uuid, timestamp, sm_clock_hz, mem_clock_hz, environment
# (same fields as the measurement environment), and "ceilings" holding these keys (SI units):
CALIBRATION_CEILINGS: dict[str, str] = {
    "read_bytes_per_s": "read-only stream, 16-byte loads, >= 1 GB footprint",
    "copy_bytes_per_s": "device-to-device copy, bytes read + written",
    "l2_bytes_per_s": "read-only stream over a footprint that fits in L2",
    "launch_floor_s": "empty kernel, back-to-back launches, per launch",
    "graph_launch_floor_s": "empty kernel replayed inside a CUDA graph, per launch",
    "fp32_flops": "FP32 FMA loop on CUDA cores",
    "fp16_mma_flops": "mma.sync m16n8k16 f16 -> f32 loop",
    "bf16_mma_flops": "mma.sync m16n8k16 bf16 -> f32 loop",
    "int8_mma_ops": "mma.sync m16n8k32 s8 -> s32 loop",
    "fp8_mma_flops": "mma.sync e4m3 loop (emulated on sm_90: see fp8_mma_emulated)",
    "cublas_fp16_flops": "cuBLAS fp16 matmul through CuPy, cross-check",
    **{resident_clusters_key(c): f"clusters of {c} CTAs resident at once, one CTA per SM (compute capability 9.0+)"
       for c in range(2, CLUSTER_PIECES_MAX + 1)},
}
# plus the boolean "fp8_mma_emulated" inside "ceilings".

# One row per measured point joined with its predictions (workbench.analysis.compare.compare_points).
COMPARISON_COLUMNS: dict[str, str] = {
    "gpu_key": "string",
    "gpu_name": "string",
    "scheme": "string",
    "kernel": "string",
    "role": "string",
    "layer": "string",
    "M": "int64",
    "N": "int64",
    "K": "int64",
    "mode": "string",
    "bytes": "float64",
    "flops": "float64",
    "intensity": "float64",  # FLOP / byte
    "time_measured_s": "float64",  # time_median_s
    "time_p10_s": "float64",
    "time_p90_s": "float64",
    "time_datasheet_s": "float64",
    "time_calibrated_s": "float64",  # NaN without a calibration for this GPU
    "time_floor_s": "float64",  # calibrated + launch/latency floor + wave quantization
    "time_kernel_s": "float64",  # kernel-aware tier (models.kernel_model); NaN: L2-hot rows, kernels without facts
    "bound_datasheet": "string",  # "memory" | "compute"
    "bound_calibrated": "string",  # "memory" | "compute" | "latency" | ""
    "ratio_datasheet": "float64",  # predicted / measured
    "ratio_calibrated": "float64",
    "ratio_floor": "float64",
    "ratio_kernel": "float64",
    "achieved_bytes_per_s": "float64",
    "achieved_flops_per_s": "float64",
    "roofline_fraction": "float64",  # attainable-time / measured time, against the calibrated tier if present
    "sm_clock_median_hz": "float64",
    "throttled": "boolean",
    "ref_error_rel": "float64",
}

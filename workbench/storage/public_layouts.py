"""The two layouts `workbench import` reads, and how their rows map to the workbench's GPUs, schemes and kernels.

(a) NVIDIA aiconfigurator's collected `gemm_perf.parquet` tables (framework, version, device, op_name, kernel_source,
gemm_dtype, m, n, k, latency in ms); (b) a plain CSV in the layout of `../shared/public-timings/` (gpu, scheme, M, N, K,
time_s, optional kernel, source, notes; the notes say framework, version, kernel_source, how it was timed, per-channel
vs g128 and whether the activation quantization is included). Both give rows of workbench.storage.public's columns
(less origin and the import stamp), checked and written there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from models.errors import InputError

# The modeled kernels a public row can be (the kernel tier gives each of them model facts). A row that maps to none
# of them is kept as `library:<kernel_source>`.
PUBLIC_KERNELS: dict[str, str] = {
    "cublas_bf16": "cuBLAS bf16 GEMM through torch F.linear (TRT-LLM PyTorch Linear, SGLang, vLLM default linear)",
    "cublas_fp16": "cuBLAS fp16 GEMM through torch F.linear",
    "trtllm_wo_int4": "TRT-LLM WeightOnlyQuantMatmul plugin, int4 weights (per-channel, or groups of 128)",
    "trtllm_wo_int8": "TRT-LLM WeightOnlyQuantMatmul plugin, int8 weights per channel",
    "trtllm_sq_int8": "TRT-LLM SmoothQuantGemm plugin: int8 W per channel x int8 A, static per-tensor act scale",
    "fp8_scaled_mm_actq": "FP8 GEMM timed with its dynamic activation-quantization kernel (SGLang per-token quant + "
                          "fp8_scaled_mm, vLLM CutlassFP8ScaledMM, TRT-LLM dynamic per-tensor)",
    "fp8_block_actq": "block-scaled FP8 GEMM (1x128 act, 128x128 W) timed with its activation quantization",
    "cublaslt_fp8": "torch._scaled_mm / cuBLASLt FP8 per-tensor, no activation quantization in the time",
}
LIBRARY_PREFIX = "library:"

# aiconfigurator's names, as its collectors write them (github.com/ai-dynamo/aiconfigurator @ 095f58a5, Apache-2.0):
# gemm_dtype is GEMMQuantMode in aic-core/src/aiconfigurator_core/sdk/common.py; kernel_source is what
# collector/{trtllm,sglang,vllm}/collect_gemm.py log (and collector/kernel_source_backends.yaml lists). The two legacy
# TRT engine plugins (TRT-LLM 1.0.0 / 1.2.0rc5 tables) time int8_wo, int4_wo and sq per layer with TensorRT's profiler;
# their int4 weights are per channel (no group-128 int4 GEMM dtype exists in those tables).
WOQ_PLUGIN = "trt_flow_/weight_only_quant_matmul_L257/PLUGIN_V2_WeightOnlyQuantMatmul_0"
SQ_PLUGIN = "trt_flow_/smooth_quant_gemm_L96/PLUGIN_V2_SmoothQuantGemm_0"
FRAMEWORKS = {"trtllm": "TRT-LLM", "trt-llm": "TRT-LLM", "sglang": "SGLang", "vllm": "vLLM"}  # display names


@dataclass(frozen=True)
class DtypeRule:
    """How rows of one aiconfigurator gemm_dtype map: scheme, kernel (None: library:<kernel_source>), the
    kernel_sources known to run that kernel (None: any), whether the time includes an activation-quantization kernel
    (None: not known) and the weight grouping ("none", "channel": group_size = K, or a group size)."""

    scheme: str
    kernel: str | None
    kernel_sources: tuple[str, ...] | None
    act_quant: bool | None
    group: str | int


GEMM_DTYPES: dict[str, DtypeRule] = {
    # torch F.linear -> cuBLAS in every framework (sglang_torch_linear, torch_flow, vllm_default, F.linear)
    "bfloat16": DtypeRule("bf16", "cublas_bf16", None, False, "none"),
    "float16": DtypeRule("fp16", "cublas_fp16", None, False, "none"),
    "int8_wo": DtypeRule("w8a16", "trtllm_wo_int8", (WOQ_PLUGIN,), False, "channel"),
    "int4_wo": DtypeRule("w4a16", "trtllm_wo_int4", (WOQ_PLUGIN,), False, "channel"),
    "sq": DtypeRule("w8a8", "trtllm_sq_int8", (SQ_PLUGIN,), False, "none"),
    # dynamic activation quantization inside the timed op: sgl_per_token_quant_fp8 + fp8_scaled_mm (SGLang),
    # activation_scheme="dynamic" (vLLM), FP8QDQ's dynamic path (TRT-LLM torch_flow, per collect_gemm.py)
    "fp8": DtypeRule("fp8", "fp8_scaled_mm_actq",
                     ("sglang_sgl_kernel_fp8_scaled_mm", "CutlassFP8ScaledMMLinearKernel", "torch_flow"), True, "none"),
    "fp8_static": DtypeRule("fp8", None, None, None, "none"),  # static act scale: what the time holds is not stated
    "fp8_block": DtypeRule("fp8", "fp8_block_actq", None, True, 128),  # 1x128 act groups, 128x128 weight blocks
    "nvfp4": DtypeRule("nvfp4", None, None, True, 16),  # flashinfer fp4 quantize + mm_fp4 inside the timed op
}

AIC_COLUMNS = ("framework", "version", "device", "op_name", "kernel_source", "gemm_dtype", "m", "n", "k", "latency")
AIC_OPTIONAL = ("power", "power_limit")
CSV_REQUIRED = ("gpu", "scheme", "M", "N", "K", "time_s")
CSV_OPTIONAL = ("kernel", "source", "notes")
# the CSV's scheme -> the aiconfigurator dtype whose rule applies (fp8 refined by the notes' variant=)
CSV_SCHEME_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "w8a16": "int8_wo", "w4a16": "int4_wo", "w8a8": "sq",
                    "fp8": "fp8", "nvfp4": "nvfp4"}  # fmt: skip


# ---------------------------------------------------------------------------------------------------- reading
def read_table(path: str | Path) -> pd.DataFrame:
    """The raw table of a .parquet or .csv file (InputError when missing, unreadable or of another type)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file; give an aiconfigurator gemm_perf.parquet or a public-timings .csv")
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path, dtype={"source": str, "notes": str, "kernel": str}, keep_default_na=False,
                               na_values=[""])
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
        raise InputError(f"{path}: not a readable table ({why})") from None
    raise InputError(f"{path}: import reads .parquet (aiconfigurator gemm_perf) or .csv (public-timings layout)")


def detect_layout(columns: list[str], name: str) -> str:
    """'aiconfigurator' or 'csv' from the columns; InputError naming unknown or missing ones."""
    cols = [str(c) for c in columns]
    if "gemm_dtype" in cols or "latency" in cols:
        layout, known, required = "aiconfigurator", set(AIC_COLUMNS) | set(AIC_OPTIONAL), AIC_COLUMNS
    elif "time_s" in cols or "scheme" in cols:
        layout, known, required = "csv", set(CSV_REQUIRED) | set(CSV_OPTIONAL), CSV_REQUIRED
    else:
        raise InputError(f"{name}: columns {', '.join(cols[:8])} are neither aiconfigurator's gemm_perf "
                         f"({', '.join(AIC_COLUMNS)}) nor the CSV layout ({', '.join(CSV_REQUIRED + CSV_OPTIONAL)})")
    missing = [c for c in required if c not in cols]
    if missing:
        raise InputError(f"{name}: {layout} layout lacks column(s) {', '.join(missing)}; "
                         f"it needs {', '.join(required)}")
    unknown = [c for c in cols if c not in known]
    if unknown:
        raise InputError(f"{name}: unknown column(s) {', '.join(unknown[:5])} for the {layout} layout; "
                         f"accepted: {', '.join(sorted(known))}")
    return layout
def _dims(raw: pd.DataFrame, cols: tuple[str, str, str], name: str) -> pd.DataFrame:
    out = {}
    for col, dim in zip(cols, ("M", "N", "K"), strict=True):
        values = pd.to_numeric(raw[col], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values <= 0) | (values != np.round(values)) | (values > 2**31)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{name}: {int(bad.sum())} row(s) have {col} = {raw[col].iloc[i]!r} (first: data row "
                             f"{i + 1}); {col} must be a positive integer")
        out[dim] = values.astype(np.int64)
    return pd.DataFrame(out, index=raw.index)


def _gpu_keys(names: pd.Series, name: str) -> np.ndarray:
    from models.hardware import find_gpu, load_gpus

    keys = {}
    for n in names.astype(str).unique():
        gpu = find_gpu(n)
        if gpu is None:
            raise InputError(f"{name}: GPU {n!r} is not in the catalogue (data/gpus.toml); known: "
                             f"{', '.join(load_gpus())}")
        keys[n] = gpu.key
    return names.astype(str).map(keys).to_numpy(dtype=object)


def _kernel(rule: DtypeRule | None, kernel_source: str) -> str:
    if rule is not None and rule.kernel and (rule.kernel_sources is None or kernel_source in rule.kernel_sources):
        return rule.kernel
    return LIBRARY_PREFIX + (kernel_source or "unknown")


def _group(rule: DtypeRule | None, k: int) -> int:
    if rule is None or rule.group == "none":
        return 0
    return k if rule.group == "channel" else int(rule.group)


# ---------------------------------------------------------------------------------------------------- layouts
def _timing_aic(framework: str, dtype: str, kernel_source: str) -> str:
    if kernel_source.startswith("trt_flow_"):
        return "TensorRT engine, per-layer profiler time (aiconfigurator collector, legacy TRT flow)"
    if framework == "vLLM" and dtype in ("fp8_block", "nvfp4"):
        return "mean per GEMM over back-to-back launches without a CUDA graph, one weight copy (aiconfigurator)"
    return "CUDA-graph replay mean per GEMM, weight copies cycled (aiconfigurator collector)"


def from_aiconfigurator(raw: pd.DataFrame, name: str, source: str | None) -> pd.DataFrame:
    dtypes = raw["gemm_dtype"].astype(str)
    unknown = sorted(set(dtypes) - set(GEMM_DTYPES))
    if unknown:
        raise InputError(f"{name}: unknown gemm_dtype {', '.join(map(repr, unknown[:5]))}; accepted: "
                         f"{', '.join(GEMM_DTYPES)}")
    ops = sorted(set(raw["op_name"].astype(str)) - {"gemm"})
    if ops:
        raise InputError(f"{name}: op_name {', '.join(map(repr, ops[:3]))} is not a GEMM; import reads op_name 'gemm'")
    dims = _dims(raw, ("m", "n", "k"), name)
    latency = pd.to_numeric(raw["latency"], errors="coerce").to_numpy(dtype=np.float64)
    framework = raw["framework"].astype(str).map(lambda f: FRAMEWORKS.get(f.lower(), f))
    kernel_source = raw["kernel_source"].astype(str)
    rules = [GEMM_DTYPES[d] for d in dtypes]
    out = pd.DataFrame({
        "gpu": _gpu_keys(raw["device"], name),
        "scheme": [r.scheme for r in rules],
        "kernel": [_kernel(r, ks) for r, ks in zip(rules, kernel_source, strict=True)],
        "group_size": [_group(r, k) for r, k in zip(rules, dims["K"], strict=True)],
        **{c: dims[c] for c in ("M", "N", "K")},
        "time_s": latency * 1e-3,  # aiconfigurator's latency is in ms
        "act_quant_included": pd.array([r.act_quant for r in rules], dtype="boolean"),
        "source": source or f"aiconfigurator gemm_perf.parquet ({name})",
        "framework": framework,
        "framework_version": raw["version"].astype(str),
        "kernel_source": kernel_source,
        "timing": [_timing_aic(f, d, ks) for f, d, ks in zip(framework, dtypes, kernel_source, strict=True)],
        "notes": "gemm_dtype=" + dtypes + "; device=" + raw["device"].astype(str) + "; latency_ms="
                 + raw["latency"].astype(str),
    }, index=raw.index)  # fmt: skip
    return out


_FRAMEWORK_RE = re.compile(r"\b(TRT-LLM|TRTLLM|SGLang|vLLM)\s+v?([0-9][\w.+-]*)", re.IGNORECASE)
_KSOURCE_RE = re.compile(r"kernel_source=([^;]+)")
_VARIANT_RE = re.compile(r"variant=([\w+-]+)")
_ACTQ_RE = re.compile(r"act(?:ivation)?[ -]quant[^;]*?\bincluded\b", re.IGNORECASE)
_CHANNEL_RE = re.compile(r"per[- ]channel", re.IGNORECASE)
_G128_RE = re.compile(r"(?<!not )\b(?:g128|group[- ]?128|group_size=128)\b", re.IGNORECASE)
_TIMING_RE = re.compile(r"replay|profiler|inference|cycled|L2 cold|timed|avg|mean|graph", re.IGNORECASE)


def _parse_notes(note: str, scheme: str, k: int) -> dict[str, object]:
    """framework, version, kernel_source, timing, act quant and grouping as the shared CSV's notes say them."""
    fw = _FRAMEWORK_RE.search(note)
    ks = _KSOURCE_RE.search(note)
    variant = _VARIANT_RE.search(note)
    dtype = CSV_SCHEME_DTYPE.get(scheme)
    if scheme == "fp8" and variant:
        dtype = "fp8_block" if "block" in variant.group(1) else "fp8_static" if "static" in variant.group(1) else "fp8"
    rule = GEMM_DTYPES.get(dtype) if dtype else None
    kernel_source = ks.group(1).strip() if ks else ""
    group = _group(rule, k)
    if scheme in ("w4a16", "w8a16"):
        group = k if _CHANNEL_RE.search(note) else 128 if _G128_RE.search(note) else group
    actq = True if _ACTQ_RE.search(note) else (rule.act_quant if rule else None)
    segments = [s.strip() for s in note.split(";")]
    return {
        "framework": FRAMEWORKS.get(fw.group(1).lower(), fw.group(1)) if fw else "",
        "framework_version": fw.group(2) if fw else "",
        "kernel_source": kernel_source,
        "timing": "; ".join(s for s in segments if _TIMING_RE.search(s) and not s.startswith("kernel_source=")),
        "act_quant_included": actq,
        "group_size": group,
        "kernel_guess": _kernel(rule, kernel_source) if rule else LIBRARY_PREFIX + (kernel_source or "unknown"),
    }


def from_csv(raw: pd.DataFrame, name: str, source: str | None) -> pd.DataFrame:
    from models.schemes import SCHEME_NAMES

    schemes = raw["scheme"].astype(str).str.strip()
    bad = sorted(set(schemes) - set(SCHEME_NAMES))
    if bad:
        raise InputError(f"{name}: unknown scheme(s) {', '.join(map(repr, bad[:5]))}; accepted: "
                         f"{', '.join(SCHEME_NAMES)}")
    dims = _dims(raw, ("M", "N", "K"), name)
    time_s = pd.to_numeric(raw["time_s"], errors="coerce").to_numpy(dtype=np.float64)
    notes = raw["notes"].fillna("").astype(str) if "notes" in raw else pd.Series("", index=raw.index)
    parsed = pd.DataFrame([_parse_notes(n, s, int(k)) for n, s, k in zip(notes, schemes, dims["K"], strict=True)],
                          index=raw.index)
    kernel = parsed["kernel_guess"]
    if "kernel" in raw:
        given = raw["kernel"].fillna("").astype(str).str.strip()
        wrong = sorted({g for g in given if g and g not in PUBLIC_KERNELS and not g.startswith(LIBRARY_PREFIX)})
        if wrong:
            raise InputError(f"{name}: unknown kernel(s) {', '.join(map(repr, wrong[:5]))}; accepted: "
                             f"{', '.join(PUBLIC_KERNELS)} or {LIBRARY_PREFIX}<name>")
        kernel = given.where(given != "", kernel)
    src = raw["source"].fillna("").astype(str) if "source" in raw else pd.Series("", index=raw.index)
    return pd.DataFrame({
        "gpu": _gpu_keys(raw["gpu"], name),
        "scheme": schemes,
        "kernel": kernel,
        "group_size": parsed["group_size"].astype(np.int64),
        **{c: dims[c] for c in ("M", "N", "K")},
        "time_s": time_s,
        "act_quant_included": pd.array(parsed["act_quant_included"].tolist(), dtype="boolean"),
        "source": src.where(src != "", source or name),
        **{c: parsed[c] for c in ("framework", "framework_version", "kernel_source", "timing")},
        "notes": notes,
    }, index=raw.index)  # fmt: skip

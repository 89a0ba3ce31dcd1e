"""Vendor-library kernels the workbench models but does not run: what a user compares against on a GPU we have never
measured. Their facts (models.kernel_terms.KernelFacts) say what one timed call does; their parameters are fitted on
public timings (models/transfer_fit.py, kept in data/model/transfer-factors.json) and checked leave-one-GPU-out.

The library kernels we also run on the H200 (cuBLAS through torch: `cublas_bf16`, `cublas_fp16`; cuBLASLt FP8:
`torch_fp8_scaled_mm`; `torch_int_mm`) are registered kernels with facts in data/model/kernel-facts.json and
parameters fitted on our own measurements; public rows of them are predicted with those. The entries here:

- `trtllm_wo_int4`: TensorRT-LLM's WeightOnlyQuantMatmul, int4: a batched GEMV (M <= 16) or a CUTLASS fpA_intB GEMM
  that dequantizes int4 in registers; per-channel or group scales (the row's group size).
- `trtllm_wo_int8`: the same plugin, int8 per-channel.
- `trtllm_sq_int8`: TensorRT-LLM's SmoothQuantGemm: int8 x int8, a static per-tensor activation scale (no
  quantization kernel in the call).
- `fp8_scaled_mm_actq`: SGLang's fp8_scaled_mm, vLLM's CUTLASS scaled_mm, TensorRT-LLM's FP8 Linear: a dynamic
  activation-quantization kernel, then an e4m3 GEMM.
- `fp8_block_actq`: block-scaled FP8 (1x128 activations, 128x128 weights): an activation-quantization kernel, then a
  block-scaled e4m3 GEMM that rescales every 128 of K.

Tiles are CUTLASS's usual choice for skinny GEMMs (16-row m-tiles up to 16, 32 and 64 above, 128 from 128),
kept as data here in one place.
"""

from __future__ import annotations

from models.kernel_catalogue import KernelEntry
from models.kernel_terms import KernelFacts

_GEMM_TILES = ((16, 16), (32, 32), (64, 64), (256, 128))


def _entry(name: str, scheme: str, min_cc: int, facts: KernelFacts) -> KernelEntry:
    return KernelEntry(name=name, scheme=scheme, role="library", backend="modeled", m_min=1, m_max=256,
                       min_cc=min_cc, max_cc=None, facts=facts)


LIBRARY: dict[str, KernelEntry] = {e.name: e for e in (
    _entry("trtllm_wo_int4", "w4a16", 80, KernelFacts("library", "mma_sync_f16", "w4", _GEMM_TILES, 128)),
    _entry("trtllm_wo_int8", "w8a16", 80, KernelFacts("library", "mma_sync_f16", "w8", _GEMM_TILES, 128)),
    _entry("trtllm_sq_int8", "w8a8", 80, KernelFacts("library", "mma_sync_s8", "none", _GEMM_TILES, 128)),
    _entry("fp8_scaled_mm_actq", "fp8", 89, KernelFacts("library", "wgmma_e4m3", "none", _GEMM_TILES, 128,
                                                        extra_launches=1)),
    _entry("fp8_block_actq", "fp8", 89, KernelFacts("library", "wgmma_e4m3", "none", _GEMM_TILES, 128,
                                                    k_block_rescale=128, extra_launches=1)),
)}
# Names public tables use for kernels the registry already has (the registry's name is the one the model knows).
ALIASES: dict[str, str] = {"cublaslt_fp8": "torch_fp8_scaled_mm"}

"""The grouped MoE kernels (kernels/grouped/grouped.py and its .cu files) on the GPU (pytest -m gpu).

Float64 checks on poisoned outputs: rel = ||y - ref|| / ||ref|| against the float64 product of the dequantized expert
weights and the bf16/fp16 activations. bf16: exact products, fp32 sums, bf16 output (2^-9): tolerance 4e-3. W4A16:
half2 sums over 32 weights (|q - z| <= 15) then fp32 (CUDA cores), or fp32 mma sums per group (tensor cores), fp16
output: tolerance 4e-3. grouped_bf16_wg (wgmma, sm_90 only: skipped elsewhere): bf16 products, fp32 sums, bf16
output, the same tolerance; its cases add every wgmma width (16-128 rows a pass), several passes of one expert and
its launch configurations. FP8 (grouped_fp8_tc): e4m3 x e4m3 products exact in fp16 (converted once, f16 mma) or the
e4m3 mma, fp32 sums, per-token x per-expert fp32 scales, fp16 output: the same tolerance (the reference dequantizes the
e4m3 activations the kernel reads, so quantization error is not counted). Cases: experts with no rows, every
token on one expert (more rows than a pass holds), batch 1..256, the gather and routed-order inputs, a skewed routing,
and the four MoE models' expert shapes (down: N = hidden, K = expert intermediate) with few experts so the weights
stay small.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.grouped import grouped
from workbench.measure.timing import poison, relative_errors

pytestmark = pytest.mark.gpu

TOL = 4e-3


@pytest.fixture(autouse=True)
def _device(cp):
    """Every test here needs CuPy and a CUDA device (conftest's `cp` skips cleanly without)."""


def _n(kernel: str, N: int) -> int:
    """N for a kernel: the wgmma kernel's tiles are 64 channels wide (the others' 16), so N rounds up to 64."""
    return -(-N // 64) * 64 if kernel in grouped.WG_KERNELS else N


def _check(kernel: str, B: int, N: int, K: int, E: int, k: int, routing: str = "uniform", gather: bool = True,
           seed: int = 0, **config) -> tuple[float, grouped.Routed]:
    if kernel in grouped.WG_KERNELS:
        import cupy as cp

        if int(cp.cuda.Device().compute_capability) != 90:
            pytest.skip(f"{kernel} runs on sm_90 only (wgmma, sm_90a)")
    r = grouped.GroupedRunner(kernel, E, k, routing, routing_seed=seed, gather=gather, **config)
    p = r.make(B, N, K, seed=seed, reference=True)
    poison(p.out)
    r.launch(p)
    err, _ = relative_errors(r.output(p), p.ref.get())
    return err, p.arrays["routed"]


@pytest.mark.parametrize("kernel", list(grouped.KERNELS))
@pytest.mark.parametrize("B", [1, 2, 3, 5, 8, 16, 33, 64, 256])
def test_batches(kernel, B):
    err, routed = _check(kernel, B, _n(kernel, 96), 256, 16, 4)
    assert err < TOL, (kernel, B, err)
    if B <= 2:
        assert (routed.counts == 0).any()  # experts with no rows are skipped


@pytest.mark.parametrize("kernel", list(grouped.KERNELS))
def test_every_token_on_one_expert(tmp_path, kernel):
    h = tmp_path / "one.txt"
    h.write_text("0 0 1000 0 0 0 0 0")
    err, routed = _check(kernel, 100, 64, 128, 8, 1, routing=str(h))
    assert routed.counts.tolist() == [0, 0, 100, 0, 0, 0, 0, 0] and err < TOL


@pytest.mark.parametrize("kernel", list(grouped.KERNELS))
def test_routed_order_input_and_skewed_routing(kernel):
    err, _ = _check(kernel, 32, _n(kernel, 208), 384, 12, 3, routing="zipf:1.2", gather=False, seed=4)
    assert err < TOL


@pytest.mark.parametrize("kernel", ["grouped_bf16", "grouped_w4a16"])
@pytest.mark.parametrize("cfg", [{"mb": 1}, {"mb": 16, "rw": 8, "u": 1}, {"warps": 8, "u": 4}, {"warps": 3}])
def test_configs(kernel, cfg):
    err, _ = _check(kernel, 24, 72, 512, 6, 2, **cfg)
    assert err < TOL


@pytest.mark.parametrize("cfg", [{"nt": 1}, {"nt": 4, "warps": 16}, {"warps": 4, "tiles": 2}, {"u": 2, "minb": 1},
                                 {"nt": 10, "minb": 1}])
@pytest.mark.parametrize("B", [3, 40])
def test_tc_configs(cfg, B):
    err, _ = _check("grouped_bf16_tc", B, 80, 640, 6, 2, **cfg)  # 5 row tiles, 10 chunks: partial groups and steps
    assert err < TOL


@pytest.mark.parametrize("cfg", [{"nt": 1}, {"nt": 4, "warps": 4}, {"warps": 2, "tiles": 2}, {"u": 2, "minb": 1},
                                 {"nt": 10, "minb": 1}, {"warps": 8, "u": 2}])
@pytest.mark.parametrize("B", [3, 40])
def test_w4_tc_configs(cfg, B):
    err, _ = _check("grouped_w4a16_tc", B, 80, 640, 6, 2, **cfg)  # 5 row tiles, 5 groups: partial groups and steps
    assert err < TOL


@pytest.mark.parametrize("cfg", [{"nt": 1}, {"nt": 4, "warps": 16}, {"warps": 4, "tiles": 2}, {"u": 2, "minb": 1},
                                 {"nt": 10, "minb": 1}, {"f16": False}, {"f16": False, "nt": 3, "u": 2, "tiles": 2}])
@pytest.mark.parametrize("B", [3, 40])
def test_fp8_tc_configs(cfg, B):
    err, _ = _check("grouped_fp8_tc", B, 80, 640, 6, 2, **cfg)  # 5 row tiles, 10 chunks: partial groups and steps
    assert err < TOL


@pytest.mark.parametrize("B", [1, 5, 64, 256])
def test_silu_mul_fused_and_separate(B):
    # gate+up with silu(gate) * up: fused (fp32 sums into the epilogue) and the GEMM + elementwise kernel (bf16 gate and
    # up rounded first); both against silu_mul of the float64 product
    assert _check("grouped_bf16_tc_silu", B, 1536, 2048, 16, 8)[0] < TOL
    assert _check("grouped_bf16_tc", B, 1536, 2048, 16, 8, separate_silu=True)[0] < TOL
    assert _check("grouped_bf16_tc_silu", B, 208, 384, 12, 3, gather=False, tiles=2)[0] < TOL


@pytest.mark.parametrize("cfg", [{"bm_max": 64}, {"bm_max": 128}, {"wg": 2}, {"stages": 3},
                                 {"bm_max": 64, "stages": 8}, {"bm_max": 128, "wg": 2, "stages": 6},
                                 {"bm_max": 128, "wg": 4}, {"bm_max": 64, "wg": 4, "stages": 3},
                                 {"bm_max": 64, "kt": 128}, {"bm_max": 128, "kt": 256, "stages": 3}])
@pytest.mark.parametrize("B", [3, 40, 200])
def test_wg_configs(cfg, B):
    # N = 192: 3 tiles of one warpgroup (the default where N % 128 != 0), 256 with two, 512 with four (2 tiles); 10
    # k-tiles of 64; B = 200, k = 2 over 6 experts: ~67 rows an expert (n128 items, or two passes at bm_max 64);
    # B = 40: n16 / n32 items
    N = {1: 192, 2: 256, 4: 512}[cfg.get("wg", 1)]
    err, _ = _check("grouped_bf16_wg", B, N, 640, 6, 2, **cfg)
    assert err < TOL


@pytest.mark.parametrize("B, bm_max", [(100, 64), (300, 128), (17, 64), (129, 128)])
def test_wg_passes_of_one_expert(tmp_path, B, bm_max):
    # every token on one expert: ceil(B / bm_max) passes of it, the last one narrower (17 rows: n32; 129: one row)
    h = tmp_path / "one.txt"
    h.write_text("0 1000 0 0")
    err, routed = _check("grouped_bf16_wg", B, 256, 384, 4, 1, routing=str(h), bm_max=bm_max)
    assert routed.counts.tolist() == [0, B, 0, 0] and err < TOL


def test_fp8_scales_are_per_expert_and_per_token():
    r = grouped.GroupedRunner("grouped_fp8_tc", 4, 2, "uniform", routing_seed=1)
    p = r.make(16, 64, 128, seed=1, reference=True)
    sw, sa = p.arrays["w"][1].get(), p.arrays["sa"].get()
    assert sw.shape == (4,) and len(np.unique(sw)) == 4 and sa.shape == (16,) and len(np.unique(sa)) == 16
    poison(p.out)
    r.launch(p)
    assert relative_errors(r.output(p), p.ref.get())[0] < TOL


# (N, K) of gate_up and down per model: Mixtral-8x7B, Qwen3-30B-A3B, DeepSeek-V3, OLMoE-1B-7B; top-k as the model,
# E cut to keep the weights small (the kernel's work per expert does not depend on E)
# gate_up gathers the tokens' rows, down reads the routed-order activations
MODEL_SHAPES = [((28672, 4096), 8, 2, True), ((4096, 14336), 8, 2, False), ((1536, 2048), 16, 8, True),
                ((2048, 768), 16, 8, False), ((4096, 7168), 10, 8, True), ((7168, 2048), 10, 8, False),
                ((2048, 2048), 16, 8, True), ((2048, 1024), 16, 8, False)]


@pytest.mark.parametrize("kernel", list(grouped.KERNELS))
@pytest.mark.parametrize("shape, E, k, gather", MODEL_SHAPES, ids=[f"{n}x{kk}" for (n, kk), *_ in MODEL_SHAPES])
@pytest.mark.parametrize("B", [1, 64])
def test_model_expert_shapes(kernel, shape, E, k, gather, B):
    N, K = shape
    err, routed = _check(kernel, B, N, K, E, k, gather=gather)
    assert err < TOL and routed.counts.sum() == B * k


def test_refusals():
    from models.errors import InputError

    with pytest.raises(InputError, match="K divisible by 128"):
        grouped.check("grouped_w4a16", 1, 64, 96, 8, 2)
    with pytest.raises(InputError, match="top-k <= E"):
        grouped.check("grouped_bf16", 1, 64, 128, 4, 8)
    with pytest.raises(InputError, match="N divisible by 16 and K by 64"):
        grouped.check("grouped_bf16_tc", 1, 72, 128, 4, 2)
    with pytest.raises(InputError, match="N divisible by 64 and K by 64"):
        grouped.check("grouped_bf16_wg", 1, 96, 128, 4, 2)
    assert np.isfinite(grouped.expert_bytes("w4a16", 64, 128))

"""The FP8 block-scaled kernel without a GPU: its tiles instantiate for sm_90a through NVRTC, its launch shapes, its
registry entry, and the block quantizer it is checked against."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.quant import quant
from kernels.toolchain import compile_check
from kernels.wgmma import wg_fp8_block
from models.errors import InputError


def test_every_tile_compiles_for_sm90a_without_spills():
    from kernels.toolchain import build, nvrtc

    try:
        compile_check.nvrtc_library()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    tiles = {(bm, t.warpgroups, t.stages, t.kt) for bm, t in wg_fp8_block.TILES.items()} | {(16, 1, 3, 128)}
    exprs = tuple(f"wg_gemm_fp8_block<{bm}, {g}, {s}, {kt}>" for bm, g, s, kt in sorted(tiles))
    include = nvrtc.include_dir()
    opts = (("--gpu-architecture=sm_90a",) + build.NVRTC_OPTIONS + ((f"-I{include}",) if include else ())
            + ("--ptxas-options=-v",))
    r = nvrtc.compile_cubin(build.source_path("wg_gemm_fp8_block.cu").read_bytes(), "wg_gemm_fp8_block.cu", opts,
                            exprs)
    assert r.ok, r.log
    assert len(r.cubin) > 1000 and all(r.lowered[e].startswith("_Z17wg_gemm_fp8_block") for e in exprs)
    assert "0 bytes spill stores" in r.log and "C7514" not in r.log  # no spills, no serialized wgmma
    assert all(" 0 bytes spill" in line for line in r.log.splitlines() if "spill stores" in line), r.log


def test_registry_entry():
    from kernels import registry

    spec = registry.get("wg_fp8_block")
    assert spec.scheme == "fp8" and spec.min_cc == spec.max_cc == 90 and (spec.m_min, spec.m_max) == (1, 256)
    assert spec in registry.specs("fp8") and wg_fp8_block.SCALE_GRANULARITY == "block"


@pytest.mark.parametrize("M,bm,tiles", [(1, 16, 1), (16, 16, 1), (17, 32, 1), (33, 64, 1), (65, 128, 1),
                                        (128, 128, 1), (129, 128, 2), (256, 128, 2)])
def test_tile_per_batch(M, bm, tiles):
    cfg = wg_fp8_block.tile_config(M)
    assert (cfg.bm, cfg.m_tiles) == (bm, tiles) and cfg.smem_bytes <= wg_fp8_block.SMEM_LIMIT
    assert cfg.kt % 128 == 0 and cfg.bn % 128 == 0


def test_bad_tiles_and_shapes_refused():
    from kernels import registry
    from kernels.wgmma.wgmma import WgTile

    with pytest.raises(InputError):
        wg_fp8_block.tile_config(16, WgTile(2, 2, 256))  # < 3 stages
    with pytest.raises(InputError):
        wg_fp8_block.tile_config(64, WgTile(2, 8, 256))  # shared memory
    runner = wg_fp8_block.make_runner(registry.get("wg_fp8_block"))
    for M, N, K in ((0, 4096, 4096), (257, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000), (1, 4096, 4224)):
        with pytest.raises(InputError):
            runner.check(M, N, K)
    runner.check(129, 4096, 4224)  # BM = 128 takes 128-byte k-tiles


def test_block_quantizer_scales_and_roundtrip():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((300, 520)) * np.exp2(rng.integers(-8, 8, size=(300, 1)))
    q = quant.quantize_fp8(w, "block", block=(128, 128))
    assert q.scales.shape == (3, 5) and q.codes.dtype == np.uint8
    assert np.isclose(q.scales[2, 4], np.abs(w[256:, 512:]).max() / quant.E4M3_MAX, rtol=1e-6)
    d = quant.dequantize_fp8(q)
    assert np.linalg.norm(d - w) / np.linalg.norm(w) < 0.04
    assert np.abs(d).max() <= np.abs(w).max() * (1 + 1e-6)
    w = w * np.where(np.arange(300) % 2, 1.0, 2.0**-20)[:, None]  # every other row 2^-20 of the others
    qa = quant.quantize_fp8(w, "block", block=(1, 128))  # per token, groups of 128 along K
    assert qa.scales.shape == (300, 5)

    def row_err(d):
        return np.mean(np.linalg.norm(d - w, axis=1) / np.linalg.norm(w, axis=1))

    # one scale for all rows flushes the small rows to zero; groups of 1 x 128 do not
    per_tensor = quant.dequantize_fp8(quant.quantize_fp8(w, "tensor"))
    assert row_err(quant.dequantize_fp8(qa)) < 0.04 < 0.4 < row_err(per_tensor)
    with pytest.raises(InputError):
        quant.quantize_fp8(w, "block", block=(0, 128))
    with pytest.raises(InputError):
        quant.quantize_fp8(w, "group")


def test_block_scaled_operands_reference_is_the_dequantized_product():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((5, 256)), rng.standard_normal((128, 256)) * 0.05
    xc, wc, sx, sw, ref = wg_fp8_block.block_scaled_operands(x, w, np)
    assert sx.shape == (5, 2) and sw.shape == (1, 2)
    xd = quant.decode_e4m3(xc) * np.repeat(sx, 128, axis=1)
    wd = quant.decode_e4m3(wc) * np.repeat(np.repeat(sw, 128, axis=0), 128, axis=1)
    np.testing.assert_allclose(ref, xd @ wd.T, rtol=1e-12)
    assert np.linalg.norm(ref - x @ w.T) / np.linalg.norm(x @ w.T) < 0.06

"""The grouped MoE kernels without a GPU (kernels/grouped/grouped.py): launch configurations from (B, E, k, N, K) alone,
refusals, and every tensor-core configuration the four MoE models' expert layers pick at batch 256 compiles for
sm_90 (the compile check of tests/test_compile.py covers the sources at their defaults only, grouped_q8_tc.cu for sm_89
and sm_90 by its `// arch:` line)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kernels.grouped import grouped, grouped_config, grouped_data
from kernels.toolchain import compile_check
from kernels.toolchain.build import source_path
from models.errors import InputError
from models.workloads import get_model

MOE = ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "olmoe-1b-7b")
# B = 256: the largest passes, most registers; B = 1: the most warps (each compile takes seconds: the GPU tests
# compile the rest)
BATCHES = (1, 256)
TC_KERNELS = {k: v for k, v in grouped.KERNELS.items() if v[2]}


def _configs() -> set[tuple[str, tuple[str, ...]]]:
    out = set()
    for key in MOE:
        for layer in (x for x in get_model(key).layers if x.experts > 1):
            for B in BATCHES:
                for scheme, source, _ in TC_KERNELS.values():
                    for l2 in (50 << 20, 60 << 20):  # H100, H200: Mixtral's fp8 gate+up is "big" on one only
                        cfg = grouped_config.choose_tc_config(B, layer.N, layer.K, layer.experts, layer.top_k,
                                                              scheme=scheme, l2_bytes=l2)
                        out.add((source, cfg.options()))
                        if scheme == "bf16":  # the fused SiLU·mul epilogue
                            out.add((source, replace(cfg, silu=True).options()))
    return out


def test_configurations_follow_the_batch_and_the_expert_size():
    # one pass per mean rows per touched expert: Qwen3 (6 MB experts) at B = 256: 16 rows, 2 n-tiles
    assert grouped_config.choose_tc_config(256, 1536, 2048, 128, 8).nt == 2
    # Mixtral's 235 MB experts exceed twice the L2: the busiest expert's ~72 rows in one pass
    assert grouped_config.choose_tc_config(256, 28672, 4096, 8, 2).nt == 10
    assert grouped_config.choose_tc_config(1, 28672, 4096, 8, 2).nt == 1
    cfg = grouped_config.choose_config("w4a16", 1, 768, 128, 8)
    assert (cfg.mb, cfg.warps, cfg.rw) == (1, 1, 8)  # 24 chunks per row: one warp, eight rows per tile
    assert grouped_config.choose_config("bf16", 256, 4096, 8, 2).mb == 16
    assert grouped_config.choose_tc_config(4, 2048, 1024, 64, 8, scheme="w4a16", warps=2).warps == 2  # overrides win


def test_fp8_configurations():
    # DeepSeek-V3 gate+up at B = 1: 112 chunks of 64 bytes a row: 16 warps, two chunks each in flight
    cfg = grouped_config.choose_tc_config(1, 4096, 7168, 256, 8, scheme="fp8")
    assert (cfg.nt, cfg.warps, cfg.u, cfg.scheme, cfg.f16) == (1, 16, 2, "fp8", True)
    assert "-DQ8_F16=1" in cfg.options() and "-DTCQ_WARPS=16" in cfg.options()
    assert "-DQ8_F16=0" in grouped_config.choose_tc_config(1, 4096, 7168, 256, 8, scheme="fp8", f16=False).options()
    # Mixtral's fp8 gate+up experts (117 MB) exceed twice a 50 MB L2 (sized to the busiest) but not a 60 MB one
    assert grouped_config.choose_tc_config(256, 28672, 4096, 8, 2, scheme="fp8", l2_bytes=50 << 20).nt == 10
    assert grouped_config.choose_tc_config(256, 28672, 4096, 8, 2, scheme="fp8", l2_bytes=60 << 20).nt == 8
    assert grouped.expert_bytes("fp8", 4096, 7168) == 4096 * 7168 + 4
    # 12 n-tiles of sums from 8 warps would not fit 48 KB of static shared memory: 4 warps
    assert grouped_config.choose_tc_config(256, 2048, 4096, 2, 2, scheme="fp8", l2_bytes=1 << 20).warps == 4
    with pytest.raises(InputError, match="needs 51216 bytes of shared memory; at most 49152"):
        grouped_config.choose_tc_config(256, 2048, 4096, 2, 2, scheme="fp8", l2_bytes=1 << 20, warps=8)
    with pytest.raises(InputError, match="no grouped tensor-core kernel for scheme 'w8a16'"):
        grouped_config.choose_tc_config(1, 2048, 4096, 8, 2, scheme="w8a16")


def test_wg_configurations():
    # Mixtral gate+up at B = 256: the busiest expert has more than 64 rows: passes of up to 128, 896 items of 256
    # channels: 4 warpgroups, 4 stages of (256 + 128) x 128 bytes; its down layer (128 such items) 2 warpgroups, 6
    # stages of (128 + 128) x 128; at B = 16 passes of 64 on 256-byte k-tiles, 4 stages of (128 + 64) x 256 bytes
    assert grouped_config.choose_wg_config(256, 28672, 4096, 8, 2) == grouped_config.WgConfig(128, 4, 4, 128)
    assert grouped_config.choose_wg_config(256, 4096, 14336, 8, 2) == grouped_config.WgConfig(128, 2, 6, 128)
    assert grouped_config.choose_wg_config(16, 28672, 4096, 8, 2) == grouped_config.WgConfig(64, 2, 4, 256)
    assert grouped_config.choose_wg_config(16, 28672, 4096, 8, 2, bm_max=128).kt == 128  # the override sets the kt
    assert grouped_config.choose_wg_config(16, 28672, 4096, 8, 2, stages=8).kt == 128  # 8 stages of 256 bytes: no
    assert grouped_config.choose_wg_config(64, 192, 640, 8, 2) == grouped_config.WgConfig(64, 1, 6, 256)
    assert grouped_config.choose_wg_config(64, 256, 704, 8, 2).kt == 128  # K = 704: 11 k-tiles of 64, not of 128
    four = grouped_config.choose_wg_config(64, 28672, 4096, 8, 2, wg=4)
    assert four.stages == 5 and four.expression() == "grouped_wg_bf16<64, 4, 5, 128>"  # 256-byte k-tiles: 2 stages
    with pytest.raises(InputError, match="N = 192 is not a multiple of its 128-channel tiles"):
        grouped_config.choose_wg_config(64, 192, 640, 8, 2, wg=2)
    with pytest.raises(InputError, match="K = 704 of its 128-element k-tiles"):
        grouped_config.choose_wg_config(64, 256, 704, 8, 2, kt=256)
    with pytest.raises(InputError, match="1, 2 or 4 warpgroups"):
        grouped_config.choose_wg_config(64, 768, 768, 8, 2, wg=3)
    with pytest.raises(InputError, match="bytes of shared memory"):
        grouped_config.choose_wg_config(64, 512, 512, 8, 2, wg=4, stages=8)


def test_refusals():
    with pytest.raises(InputError, match="unknown grouped kernel 'grouped_fp4'"):
        grouped.check("grouped_fp4", 1, 64, 128, 8, 2)
    with pytest.raises(InputError, match="at most 1024 experts"):
        grouped.check("grouped_bf16", 1, 64, 128, 2048, 2)
    with pytest.raises(InputError, match="K divisible by 128"):
        grouped.check("grouped_w4a16_tc", 1, 64, 192, 8, 2)
    with pytest.raises(InputError, match="unknown grouped kernel"):
        grouped.GroupedRunner("bf16", 8, 2)
    with pytest.raises(InputError, match="grouped_fp8_tc needs N divisible by 16 and K by 64, got N=72, K=640"):
        grouped.check("grouped_fp8_tc", 1, 72, 640, 8, 2)
    with pytest.raises(InputError, match="N divisible by 16 and K by 64"):
        grouped.check("grouped_fp8_tc", 1, 80, 96, 8, 2)
    grouped.check("grouped_fp8_tc", 3, 80, 640, 6, 2)  # 5 row tiles, 10 chunks: accepted
    assert grouped.expert_bytes("w4a16", 4096, 7168) == 4096 * 7168 // 2 + 4096 * 56 * 4


def test_every_chosen_configuration_compiles():
    try:
        compile_check.nvrtc_library()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    if compile_check.cuda_include_dir() is None:
        pytest.skip("no CUDA headers")
    configs = _configs()
    assert len(configs) >= 5
    for source, options in sorted(configs):
        r = compile_check.compile_source(source_path(source), "sm_90", options)
        assert r.ok, f"{source} {options}:\n{r.log}"


def test_silu_mul_on_interleaved_gate_up_rows_equals_the_plain_layout():
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((48, 32)), rng.standard_normal((5, 32))  # I = 24: three tiles of 8 gate + 8 up
    fused = grouped_data.silu_mul(x @ grouped_data.interleave_gate_up(w).T, interleaved=True)
    plain = grouped_data.silu_mul(x @ w.T, interleaved=False)
    g, u = x @ w[:24].T, x @ w[24:].T
    assert np.allclose(plain, g / (1 + np.exp(-g)) * u) and np.allclose(fused, plain) and fused.shape == (5, 24)
    assert np.array_equal(grouped_data.interleave_gate_up(w)[8:16], w[24:32])  # tile 0: gate 0-7, then up 0-7
    with pytest.raises(InputError, match="I a multiple of 8"):
        grouped_data.interleave_gate_up(w[:40])
    cfg = grouped_config.choose_tc_config(4, 1536, 2048, 128, 8, silu=True)
    assert "-DTCF_SILU=1" in cfg.options() and "-DTCF_SILU=1" not in replace(cfg, silu=False).options()
    with pytest.raises(InputError, match="separate_silu runs after grouped_bf16_tc only"):
        grouped.GroupedRunner("grouped_fp8_tc", 8, 2, separate_silu=True)
    assert grouped.GroupedRunner("grouped_bf16_tc", 8, 2, separate_silu=True).name == "grouped_bf16_tc+silu_mul"

"""The wgmma kernels' launch arithmetic and argument checks (CPU only; the kernels themselves: test_wgmma_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import registry, wgmma
from models.errors import InputError
from models.kernel_terms import persistent_grid


def test_batch_tile_is_the_smallest_that_holds_m():
    assert [wgmma.tile_config(m).bm for m in (1, 16, 17, 32, 33, 100, 128, 129, 256)] == \
        [16, 16, 32, 32, 64, 128, 128, 256, 256]
    assert all(wgmma.tile_config(m).m_tiles == 1 for m in (1, 100, 256))


def test_tile_config_shared_memory_threads_and_channels():
    cfg = wgmma.tile_config(128, wgmma.WgTile(2, 4, 128, tma=True, mb=2))
    assert (cfg.bn, cfg.threads, cfg.variant) == (256, 288, "wg-tma")
    assert cfg.smem_bytes == 4 * (256 + 128) * 128 + 1024
    plain = wgmma.tile_config(16, wgmma.WgTile(2, 6, 256))
    assert (plain.bn, plain.threads, plain.variant, plain.kt) == (128, 256, "wg", 256)


@pytest.mark.parametrize("tile,M", [(wgmma.WgTile(2, 8, 128), 256),  # 320 KB of stages
                                    (wgmma.WgTile(2, 2, 128), 16),  # cp.async needs 3 stages
                                    (wgmma.WgTile(2, 4, 96), 16),  # k-tile not whole 128-byte rows
                                    (wgmma.WgTile(2, 4, 128, mb=2), 16),  # 2 blocks per warpgroup only with TMA
                                    (wgmma.WgTile(2, 3, 128, tma=True, mb=2), 256)])  # 256 x 2 accumulators
def test_impossible_tiles_are_refused(tile, M):
    with pytest.raises(InputError, match="wgmma tile"):
        wgmma.tile_config(M, tile)


def test_parse_tile():
    assert wgmma.parse_tile("2x4x128") == wgmma.WgTile(2, 4, 128)
    assert wgmma.parse_tile("2x4x128xt") == wgmma.WgTile(2, 4, 128, True, 1)
    assert wgmma.parse_tile("1x6x256XT2") == wgmma.WgTile(1, 6, 256, True, 2)
    for bad in ("2x4", "2x4x128xq", "axbxc", "2x4x128xt2x1", ""):
        with pytest.raises(InputError, match="bad wgmma tile"):
            wgmma.parse_tile(bad)


def test_w4a16_tiles():
    assert [wgmma.w4_tile_config(m).bm for m in (1, 16, 17, 64, 100, 128, 200, 256)] == \
        [16, 16, 32, 64, 128, 128, 128, 128]
    assert [wgmma.w4_tile_config(m).m_tiles for m in (128, 129, 256)] == [1, 2, 2]
    cfg = wgmma.w4_tile_config(16, wgmma.WgTile(2, 8, 256, True, 2))
    assert (cfg.bn, cfg.threads, cfg.smem_bytes) == (256, 288, 8 * 21504 + 1024)
    split = wgmma.w4_tile_config(16, wgmma.WgTile(2, 6, 256, True, 1))  # two warpgroups share one block
    assert (split.bn, split.threads, split.smem_bytes) == (128, 288, 6 * 13312 + 1024)
    assert wgmma.w4_tile_config(64, wgmma.WgTile(4, 4, 256, True, 1)).bn == 256
    with pytest.raises(InputError, match="WGxSTAGESx256xtMB"):
        wgmma.w4_tile_config(16, wgmma.WgTile(2, 8, 128, True, 2))
    with pytest.raises(InputError, match="WG\\*MB even"):
        wgmma.w4_tile_config(16, wgmma.WgTile(1, 6, 256, True, 1))  # half a block
    with pytest.raises(InputError, match="shared memory"):
        wgmma.w4_tile_config(128, wgmma.WgTile(1, 9, 256, True, 2))


@pytest.mark.parametrize("name", ["wg_bf16", "wg_fp16", "wg_w8a8", "wg_fp8", "wg_w4a16"])
def test_runner_refuses_bad_shapes_before_touching_the_gpu(name):
    runner = registry.runner(name)
    runner.check(16, 4096, 4096)
    for M, N, K in ((0, 4096, 4096), (257, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000), (16, 4096, 0)):
        with pytest.raises(InputError):
            runner.check(M, N, K)


def test_specs_are_hopper_only():
    for spec in wgmma.SPECS:
        assert (spec.min_cc, spec.max_cc, spec.m_min, spec.m_max) == (90, 90, 1, 256)
        assert spec.source in ("wg_gemm.cu", "wg_gemm_w4a16.cu")
    assert "native FP8" in registry.get("wg_fp8").notes


@pytest.mark.parametrize("tiles,ktiles,ctas", [
    (32, 32, 128),  # 4096 channels: every tile in 4 pieces (97 % of 132 SMs)
    (32, 86, 128),  # 4 uneven pieces (21-22 k-tiles); kernels/splitk.cuh keeps each in one tile
    (16, 16, 128),  # 8 pieces
    (64, 64, 128),  # 2 pieces
    (224, 64, 112),  # 2 whole tiles per CTA (85 %)
    (250, 32, 125),  # 2 whole tiles per CTA (95 %)
    (172, 32, 132),  # 2 whole tiles would leave 35 % idle: stream-K
    (96, 32, 132),  # one whole tile each would leave 27 % idle: stream-K
    (175, 32, 132),  # whole tiles that do not divide evenly: stream-K
    (8, 2, 16),  # never more CTAs than iterations
])
def test_persistent_grid_aligns_pieces_where_the_sms_stay_busy(tiles, ktiles, ctas):
    assert persistent_grid(tiles, ktiles, 132, 0.8) == ctas


def test_each_wgmma_kernel_declares_how_many_idle_sms_its_grid_may_leave():
    assert persistent_grid(224, 64, 132, 0.9) == 132  # wg_w4a16: 85 % busy is too few, stream-K
    assert persistent_grid(250, 32, 132, 0.9) == 125
    assert persistent_grid(32, 32, 132, 0.0) == 132  # 0: never aligned
    shares = {s.name: s.facts.aligned_grid for s in wgmma.SPECS}
    assert shares == {"wg_bf16": 0.8, "wg_fp16": 0.8, "wg_w8a8": 0.8, "wg_fp8": 0.8, "wg_w4a16": 0.9}


def test_the_model_counts_the_slots_the_grid_rule_leaves():
    facts = registry.get("wg_fp8").facts
    assert facts.aligned_grid
    slots = facts.fixup_slots(np.array([128, 128, 128, 128]), np.array([4096, 22016, 28672, 12288]), 132)
    assert slots.tolist() == [4.0, 1.0, 0.0, 2.0]  # split in 4; stream-K; whole tiles; stream-K over 96 tiles
    old = registry.get("tc_fp8").facts  # the mma.sync kernels keep stream-K over every SM
    assert not old.aligned_grid and old.fixup_slots(np.array([128]), np.array([28672]), 132).tolist() == [1.0]


def test_the_runner_takes_the_rule_or_stream_k_and_refuses_other_grids(monkeypatch):
    spec = registry.get("wg_bf16")
    cfg = wgmma.tile_config(128)
    grids = {}
    for grid in wgmma.GRIDS:
        runner = wgmma.make_runner(spec, grid=grid)
        monkeypatch.setattr(runner, "_sms_and_per_sm", lambda fn, cfg: (132, 1))
        grids[grid] = (runner._grid(None, cfg, 32, 64), runner._grid(None, cfg, 224, 64))
    assert grids == {"rule": (128, 112), "stream-k": (132, 132)}
    with pytest.raises(InputError, match="unknown wgmma grid 'split'"):
        wgmma.make_runner(spec, grid="split")


def test_bench_tensorcore_refuses_an_unknown_grid_before_touching_the_gpu(capsys):
    from bench import bench_tensorcore

    assert bench_tensorcore.main(["--grid", "rule,splitk"]) == 2
    assert "--grid takes a comma list of rule, stream-k" in capsys.readouterr().err

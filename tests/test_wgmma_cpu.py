"""The wgmma kernels' launch arithmetic and argument checks (CPU only; the kernels themselves: test_wgmma_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import registry
from kernels.wgmma import wgmma
from models.errors import InputError
from models.kernel_terms import persistent_grid


def test_batch_tile_is_the_smallest_that_holds_m():
    assert [wgmma.tile_config(m).bm for m in (1, 16, 17, 32, 33, 100, 128, 129, 256)] == \
        [16, 16, 32, 32, 64, 128, 128, 256, 256]
    assert all(wgmma.tile_config(m).m_tiles == 1 for m in (1, 100, 256))


def test_narrow_layers_take_64_channel_tiles():
    """WG_BANDS: layers of at most 4096 channels one warpgroup per CTA; 2048 channels stop at 64-row m-tiles."""
    def shape(M, N):
        cfg = wgmma.tile_config(M, N=N)
        return cfg.bn, cfg.bm, cfg.m_tiles, cfg.variant

    assert [shape(M, 4096) for M in (1, 32, 64, 128, 256)] == [
        (64, 16, 1, "wg"), (64, 32, 1, "wg"), (64, 64, 1, "wg-tma"), (64, 128, 1, "wg-tma"), (64, 256, 1, "wg-tma")]
    assert [shape(M, 2048) for M in (16, 64, 65, 128, 256)] == [
        (64, 16, 1, "wg"), (64, 64, 1, "wg-tma"), (64, 64, 2, "wg-tma"), (64, 64, 2, "wg-tma"), (64, 64, 4, "wg-tma")]
    assert all(shape(M, N)[0] == 128 for M in (1, 64, 256) for N in (4160, 6144, 22016))
    assert wgmma.tile_config(128, wgmma.parse_tile("2x6x128xt"), N=4096).bn == 128  # a forced tile wins
    runner = registry.runner("wg_fp8")
    runner.check(64, 4032, 4096)  # 63 tiles of 64 channels
    with pytest.raises(InputError, match="N a multiple of 128"):
        runner.check(64, 4160, 4096)  # wider than the band: 128-channel tiles
    facts = runner.spec.facts
    assert [b[:2] for b in facts.bands] == [(2048, 64), (4096, 64)]
    assert facts.tile_rows(np.array([256, 256, 256]), np.array([2048, 4096, 8192])).tolist() == [64, 256, 256]
    assert facts.padded_n(np.array([1000, 5000])).tolist() == [1024, 5120]
    assert registry.get("wg_w4a16").facts.bands == ()


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
    assert wgmma.parse_tile("1x8x128xt@128") == wgmma.WgTile(1, 8, 128, True, 1, 128)
    for bad in ("2x4", "2x4x128xq", "axbxc", "2x4x128xt2x1", "", "1x8x128xt@", "1x8x128xt@x", "1x8x128xt@-64"):
        with pytest.raises(InputError, match="bad wgmma tile"):
            wgmma.parse_tile(bad)


def test_a_forced_batch_tile_cuts_m_into_more_tiles():
    # the 64-channel tiles of the seventh pass's call4: one warpgroup, 128-row m-tiles at M = 256
    cfg = wgmma.tile_config(256, wgmma.parse_tile("1x8x128xt@128"))
    assert (cfg.bm, cfg.m_tiles, cfg.bn, cfg.threads, cfg.smem_bytes) == (128, 2, 64, 160, 8 * 192 * 128 + 1024)
    assert wgmma.tile_config(100, wgmma.parse_tile("1x12x128xt@64")).m_tiles == 2
    assert wgmma.w4_tile_config(200, wgmma.parse_tile("2x3x256xt1@64")).m_tiles == 4
    with pytest.raises(InputError, match="batch tile 48 is not one of this kernel's"):
        wgmma.tile_config(64, wgmma.parse_tile("2x4x256@48"))
    with pytest.raises(InputError, match="batch tile 256 is not one of this kernel's"):
        wgmma.w4_tile_config(64, wgmma.parse_tile("2x3x256xt1@256"))


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
    (32, 86, 128),  # 4 uneven pieces (21-22 k-tiles); kernels/tensorcore/splitk.cuh keeps each in one tile
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


H200_RESIDENT = {2: 66, 3: 39, 4: 30}  # clusters resident at once, one CTA per SM (cuOccupancyMaxActiveClusters)


def test_the_model_counts_the_slots_the_grid_rule_leaves():
    from dataclasses import replace

    facts = replace(registry.get("wg_fp8").facts, bands=())  # 128-channel tiles on every layer
    assert facts.aligned_grid and facts.cluster_grid
    M, N = np.array([128, 128, 128, 128, 128, 128]), np.array([4096, 22016, 28672, 12288, 2048, 8192])
    slots = replace(facts, cluster_grid=0.0).fixup_slots(M, N, 132)
    assert slots.tolist() == [4.0, 1.0, 0.0, 2.0, 8.0, 2.0]  # split in 4; stream-K; whole tiles; stream-K; 8; 2
    # in clusters: 3 pieces of the 32 tiles (30 clusters of 4 fit, not 32), 4 of 16, 2 of 64: (s - 1) / s of a tile
    slots = facts.fixup_slots(M, N, 132, H200_RESIDENT)
    assert np.allclose(slots, [2 / 3, 1.0, 0.0, 2.0, 3 / 4, 1 / 2])
    assert np.allclose(facts.fixup_slots(M[:1], N[:1], 132), [3 / 4])  # no residency known: 132 // 4 = 33 clusters
    # the narrow layers' 64-channel tiles (WG_BANDS): 4096 channels = 64 tiles in 2 pieces at M = 128 and 256;
    # 2048 channels at M = 128 two 64-row m-tiles of 32 tiles in 2 pieces, at M = 256 four m-tiles of whole tiles
    banded = registry.get("wg_fp8").facts
    M, N = np.array([128, 256, 128, 256, 128]), np.array([4096, 4096, 2048, 2048, 6144])
    assert banded.bn_at(N).tolist() == [64, 64, 64, 64, 128]
    assert banded.m_passes(M, N).tolist() == [1, 1, 2, 4, 1]
    assert np.allclose(banded.fixup_slots(M, N, 132, H200_RESIDENT), [1 / 2, 1 / 2, 1 / 2, 0.0, 1 / 2])
    old = registry.get("tc_fp8").facts  # the mma.sync kernels keep stream-K over every SM
    assert not old.aligned_grid and old.fixup_slots(np.array([128]), np.array([28672]), 132).tolist() == [1.0]


@pytest.mark.parametrize("tiles,ktiles,slots,share,pieces", [
    (32, 32, 132, 0.4, 3),  # 4 pieces would need 32 clusters of 4: 30 fit
    (16, 16, 132, 0.4, 4),  # at most CLUSTER_PIECES_MAX
    (64, 32, 132, 0.4, 2),
    (48, 32, 132, 0.4, 2),  # 96 CTAs
    (64, 32, 132, 0.9, 2),  # 97 % busy
    (32, 32, 132, 0.9, 0),  # w4a16: 3 pieces would leave 27 % idle
    (86, 32, 132, 0.4, 0),  # 2 pieces need 172 CTAs
    (32, 2, 132, 0.4, 2),  # never more pieces than k-tiles
    (8, 32, 132, 0.4, 0),  # 4 pieces of 8 tiles keep 24 % busy
    (32, 32, 132, 0.0, 0),  # no cluster path
    (32, 32, 66, 0.4, 2),  # two m-tiles share the SMs and the clusters: 33 of 2 per m-tile
])
def test_cluster_pieces(tiles, ktiles, slots, share, pieces):
    from models.kernel_terms import cluster_pieces

    resident = {c: r // (132 // slots) for c, r in H200_RESIDENT.items()}
    assert cluster_pieces(tiles, ktiles, slots, resident, share) == pieces


def test_cluster_parts_must_fit_the_stages():
    assert wgmma.cluster_fits(4, 128 * 256, 256, 196608)  # BM = 256: 3 x 8 x 256 x 16 = 96 KB
    assert wgmma.cluster_fits(8, 128 * 16, 256, 7 * 256 * 16)  # 2 groups per thread in 8 parts: 7 rows of 1
    assert not wgmma.cluster_fits(8, 128 * 16, 256, 7 * 256 * 16 - 1)
    assert not wgmma.cluster_fits(4, 128 * 256, 256, 90000)


def test_the_runner_takes_the_rule_or_stream_k_and_refuses_other_grids(monkeypatch):
    spec = registry.get("wg_bf16")
    cfg = wgmma.tile_config(128)
    monkeypatch.setattr(wgmma, "max_active_clusters", lambda fn, threads, smem, size: H200_RESIDENT[size])
    grids = {}
    for grid in wgmma.GRIDS:
        runner = wgmma.make_runner(spec, grid=grid)
        monkeypatch.setattr(runner, "_sms_and_per_sm", lambda fn, cfg: (132, 1))
        monkeypatch.setattr(runner, "_expression", lambda cfg: "instance")
        grids[grid] = (runner._grid(None, cfg, 32, 64), runner._grid(None, cfg, 224, 64))
    # the rule: 32 tiles in 3 pieces as clusters (30 clusters of 4 fit, not 32), 224 as 112 CTAs of 2 whole tiles
    assert grids == {"rule": (96, 112), "rule-slots": (128, 112), "stream-k": (132, 132)}
    with pytest.raises(InputError, match="unknown wgmma grid 'split'"):
        wgmma.make_runner(spec, grid="split")


def test_a_driver_that_cannot_count_clusters_gets_the_slot_grid(monkeypatch):
    def refuse(fn, threads, smem, size):
        raise RuntimeError("cuOccupancyMaxActiveClusters failed with CUresult 1")

    monkeypatch.setattr(wgmma, "max_active_clusters", refuse)
    runner = wgmma.make_runner(registry.get("wg_fp8"))
    monkeypatch.setattr(runner, "_sms_and_per_sm", lambda fn, cfg: (132, 1))
    monkeypatch.setattr(runner, "_expression", lambda cfg: "instance")
    cfg = wgmma.tile_config(128)
    assert runner._pieces(None, cfg, 32, 32) == 0 and runner._grid(None, cfg, 32, 32) == 128  # 4 pieces, slots


def test_bench_tensorcore_refuses_an_unknown_grid_before_touching_the_gpu(capsys):
    from bench import bench_tensorcore

    assert bench_tensorcore.main(["--grid", "rule,splitk"]) == 2
    assert "--grid takes a comma list of rule, rule-slots, stream-k" in capsys.readouterr().err


def test_cluster_instances_are_named_by_their_pieces():
    from dataclasses import replace

    runner = registry.runner("wg_fp8")
    assert (runner._expression(replace(wgmma.tile_config(64), cluster=4))
            == "wg_gemm_cluster<wg::OpFP8, 64, 2, 4, 256, 4>")
    assert (runner._expression(replace(wgmma.tile_config(128), cluster=2))
            == "wg_gemm_tma_cluster<wg::OpFP8, 128, 2, 1, 6, 128, 2>")
    assert runner._expression(wgmma.tile_config(128)) == "wg_gemm_tma<wg::OpFP8, 128, 2, 1, 6, 128>"
    w4 = registry.runner("wg_w4a16")
    assert w4._expression(replace(wgmma.w4_tile_config(100), cluster=8)) == "wg_gemm_w4a16_cluster<128, 2, 1, 3, 8>"


def test_compile_jobs_add_the_cluster_instances_the_rule_may_take(monkeypatch):
    from kernels.tensorcore import tensorcore

    runner = registry.runner("wg_fp8")
    monkeypatch.setattr(wgmma, "device_sms", lambda: 132)
    exprs = [j[1] for j in runner.compile_jobs(128, 6144, 4096)]  # 48 tiles: 2 pieces (3 would need 144 SMs)
    assert exprs == ["wg_gemm_tma<wg::OpFP8, 128, 2, 1, 6, 128>",
                     "wg_gemm_tma_cluster<wg::OpFP8, 128, 2, 1, 6, 128, 2>"]
    exprs = [j[1] for j in runner.compile_jobs(32, 2048, 4096)]  # 32 tiles of 64 channels: 4 pieces if 32
    assert exprs == ["wg_gemm<wg::OpFP8, 32, 1, 8, 256>",  # clusters of 4 fit (33 if none were lost), else 3
                     "wg_gemm_cluster<wg::OpFP8, 32, 1, 8, 256, 3>",
                     "wg_gemm_cluster<wg::OpFP8, 32, 1, 8, 256, 4>"]
    assert [j[1][-2] for j in runner.compile_jobs(128, 4096, 4096)[1:]] == ["2"]  # 64 tiles of 64 channels
    assert len(runner.compile_jobs(128, 22016, 4096)) == 1  # stream-K there: no cluster
    assert [j[1][-2] for j in runner.compile_jobs(128, 8192, 8192)[1:]] == ["2"]
    assert len(wgmma.make_runner(registry.get("wg_fp8"), grid="rule-slots").compile_jobs(128, 4096, 4096)) == 1
    monkeypatch.setattr(wgmma, "device_sms", lambda: 0)  # no GPU to ask: the plain instance
    assert len(runner.compile_jobs(128, 4096, 4096)) == 1
    assert tensorcore.ktiles_of("w4a16", 4096, wgmma.w4_tile_config(16)) == 32

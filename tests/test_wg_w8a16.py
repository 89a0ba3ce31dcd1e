"""The W8A16 wgmma GEMMs without a GPU (kernels/wgmma/wg_w8a16.py, kernels/quant/pack_q8.py pack_w8a16_wg): the tile
table, the refusals, the template instances, the registry facts the model and the profiler read, and the packing
replayed: NumPy reads the packed bytes the way the kernel does (one 16-byte word per lane, warp, two k-steps and
64-channel block), converts them as the kernel's prmt/hsub2 (fp16) or prmt/FADD (bf16) do, places each register at
its place in wgmma's m64k16 A fragment, and must reproduce x . q^T exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import registry
from kernels.quant import pack_q8
from kernels.wgmma import wg_w8a16, wgmma
from models.errors import InputError
from workbench.measure.profiler import plan, select_kernels, unsupported


def _pair(word: int, bf16: bool) -> tuple[float, float, float, float]:
    """The kernel's to_pairs on one 32-bit word of four biased bytes: (q0, q1) of `lo`, (q2, q3) of `hi`."""
    out = []
    for i in range(4):
        u = (word >> (8 * i)) & 0xFF
        if bf16:
            f = np.array([0x4B000000 | u], dtype=np.uint32).view(np.float32)[0] - np.float32(8388736.0)
            out.append(float(np.array([np.array([f], np.float32).view(np.uint32)[0] & 0xFFFF0000],
                                      dtype=np.uint32).view(np.float32)[0]))
        else:
            h = np.array([0x6400 | u], dtype=np.uint16).view(np.float16)[0]
            out.append(float(np.float16(h - np.float16(1152.0))))
    return tuple(out)


def _emulate(packed: np.ndarray, x: np.ndarray, bf16: bool) -> np.ndarray:
    """y = x . A^T with A rebuilt from the kernel's reads: block b, chunk c, warp w, word j, lane (g, t); word
    (h, half) of the 16 bytes -> registers a[2 half] (row g) and a[2 half + 1] (row g + 8) of k-step 2 j + h, which
    wgmma reads as k = 2 t, 2 t + 1 (a0, a1) and 2 t + 8, 2 t + 9 (a2, a3) of its 16."""
    nb, nc = packed.shape[:2]
    A = np.zeros((nb * 64, nc * 64))
    words = packed.reshape(nb, nc, 4, 2, 32, 4, 4).view(np.uint32).reshape(nb, nc, 4, 2, 32, 4)
    for b in range(nb):
        for c in range(nc):
            for w in range(4):
                for j in range(2):
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        for h in range(2):
                            ks = 4 * c + 2 * j + h
                            for half in range(2):
                                q = _pair(int(words[b, c, w, j, lane, 2 * h + half]), bf16)
                                a_lo, a_hi = q[:2], q[2:]  # rows g and g + 8
                                k = 16 * ks + 2 * t + 8 * half
                                A[64 * b + 16 * w + g, k:k + 2] = a_lo
                                A[64 * b + 16 * w + g + 8, k:k + 2] = a_hi
    return x @ A.T


@pytest.mark.parametrize("bf16", [False, True])
def test_the_kernels_reads_of_the_packed_bytes_compute_x_times_codes(bf16):
    rng = np.random.default_rng(7 + bf16)
    q = rng.integers(-128, 128, size=(128, 192), dtype=np.int8)
    q[0, :4] = (-128, 127, 0, -1)
    x = rng.integers(-8, 8, size=(3, 192)).astype(np.float64) / 4
    np.testing.assert_array_equal(_emulate(pack_q8.pack_w8a16_wg(q), x, bf16), x @ q.astype(np.float64).T)


def test_a_misplaced_word_is_caught():
    rng = np.random.default_rng(5)
    q = rng.integers(-128, 128, size=(64, 64), dtype=np.int8)
    x = rng.integers(-8, 8, size=(2, 64)).astype(np.float64)
    packed = pack_q8.pack_w8a16_wg(q).reshape(1, 1, 256, 16)[..., [4, 5, 6, 7, 0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14,
                                                                   15]]
    assert not np.array_equal(_emulate(np.ascontiguousarray(packed).reshape(1, 1, 4096), x, False),
                              x @ q.astype(np.float64).T)


def test_packing_round_trips_and_refuses_what_it_cannot_hold():
    q = np.random.default_rng(1).integers(-128, 128, size=(192, 128), dtype=np.int8)
    packed = pack_q8.pack_w8a16_wg(q)
    assert packed.shape == (3, 2, 4096) and packed.dtype == np.uint8
    np.testing.assert_array_equal(pack_q8.unpack_w8a16_wg(packed), q)
    with pytest.raises(InputError, match="multiples of 64"):
        pack_q8.pack_w8a16_wg(q[:100])
    with pytest.raises(InputError, match="int8"):
        pack_q8.pack_w8a16_wg(q.view(np.uint8))


@pytest.mark.parametrize(("M", "bm"), [(1, 16), (16, 16), (17, 32), (32, 32), (33, 64), (64, 64), (65, 128),
                                       (128, 128), (129, 256), (256, 256)])
def test_the_batch_tile_is_the_smallest_holding_m_and_every_tile_is_128_channels(M, bm):
    cfg = wg_w8a16.w8_tile_config(M)
    assert (cfg.bm, cfg.m_tiles, cfg.bn, cfg.variant) == (bm, 1, 128, "wg-w8")
    t = wg_w8a16.W8_TILES[bm]
    assert cfg.threads == (160 if t.warpgroups == 1 else 384) and cfg.smem_bytes <= wgmma.SMEM_LIMIT


@pytest.mark.parametrize("tile", ["2x4x256xt2", "1x8x256xt2@256", "3x4x128xt1", "2x2x64xt1", "2x4x128", "2x1x128xt1",
                                  "2x12x256xt1@128"])
def test_tiles_the_kernel_cannot_run_are_refused_in_one_line(tile):
    with pytest.raises(InputError) as exc:
        wg_w8a16.w8_tile_config(200, wgmma.parse_tile(tile))
    assert "\n" not in str(exc.value) and "w8a16 wgmma tile" in str(exc.value)


@pytest.mark.parametrize("name", ["wg_w8a16", "wg_w8a16_bf16"])
def test_shapes_and_batches_are_refused_before_anything_is_allocated(name):
    runner = registry.runner(name)
    runner.check(128, 128, 64)  # 64-deep k-tiles
    runner.check(16, 128, 128)
    runner.check(256, 22016, 4096)
    runner.check(16, 64, 4096)  # a narrow layer's band: 64-channel tiles
    for M, N, K, needle in ((16, 4160, 4096, "N a multiple of 128"), (16, 96, 4096, "N a multiple of 64"),
                            (64, 4096, 4000, "K a multiple of 128"),
                            (256, 4096, 96, "K a multiple of 64"), (257, 4096, 4096, r"M in \[1, 256\]"),
                            (0, 4096, 4096, r"M in \[1, 256\]")):
        with pytest.raises(InputError, match=needle):
            runner.check(M, N, K)


@pytest.mark.parametrize(("M", "bm", "m_tiles"), [(1, 16, 1), (17, 32, 1), (33, 64, 1), (65, 64, 2), (129, 64, 3),
                                                  (256, 64, 4)])
def test_narrow_layers_run_their_band_and_the_model_reads_the_same_tiles(M, bm, m_tiles):
    n_max, table = wg_w8a16.W8_BANDS[0]
    for N in (64, 896, n_max):
        cfg = wg_w8a16.w8_tile_config(M, N=N)
        t = table[cfg.bm]
        assert (cfg.bm, cfg.m_tiles, cfg.bn) == (bm, m_tiles, 64 * t.warpgroups * t.mb)
        for name in ("wg_w8a16", "wg_w8a16_bf16"):
            f = registry.get(name).facts
            assert f.bn_at(N) == cfg.bn and f.bn_at(n_max + 128) == 128
            assert f.tile_rows(np.array([M]), N)[0] == cfg.bm and f.padded_m(np.array([M]), N)[0] == bm * m_tiles
    wider = wg_w8a16.W8_BANDS[-1][0] + 128
    assert wg_w8a16.w8_tile_config(M, N=wider) == wg_w8a16.w8_tile_config(M)  # wider than every band: W8_TILES
    forced = wgmma.parse_tile("2x3x128xt1")  # a forced tile ignores the band
    assert wg_w8a16.w8_tile_config(M, forced, 896) == wg_w8a16.w8_tile_config(M, forced)


@pytest.mark.parametrize(("M", "bm", "m_tiles"), [(16, 16, 1), (64, 64, 1), (128, 128, 1), (129, 128, 2),
                                                  (256, 128, 2)])
def test_layers_of_4096_channels_stop_at_128_row_m_tiles(M, bm, m_tiles):
    for N in (2048 + 128, 4096):
        cfg = wg_w8a16.w8_tile_config(M, N=N)
        assert (cfg.bm, cfg.m_tiles, cfg.bn) == (bm, m_tiles, 128)
        assert registry.get("wg_w8a16").facts.padded_m(np.array([M]), N)[0] == bm * m_tiles
    assert wg_w8a16.w8_tile_config(256, N=4096 + 128).m_tiles == 1  # wider: one 256-row m-tile


def test_instances_name_the_op_tile_and_cluster():
    from dataclasses import replace

    runner = registry.runner("wg_w8a16_bf16")
    cfg = runner.config(100, 4096, 4096)
    t = wg_w8a16.W8_TILES[128]
    expr = f"wg_gemm_w8a16<wg::OpW8BF16, 128, {t.warpgroups}, {t.mb}, {t.stages}, {t.kt // 2}>"
    assert runner._expression(cfg) == expr
    assert runner._expression(replace(cfg, cluster=3)) == expr.replace("w8a16<", "w8a16_cluster<")[:-1] + ", 3>"
    assert runner.compile_jobs(16, 4096, 4096)[0][2:] == ("sm_90a", ())  # no GPU: the plain instance only


def test_specs_declare_scheme_path_dequant_tiles_and_hopper_only():
    for name, path in (("wg_w8a16", "wgmma_f16"), ("wg_w8a16_bf16", "wgmma_bf16")):
        s = registry.get(name)
        assert (s.scheme, s.backend, s.min_cc, s.max_cc, s.m_min, s.m_max) == ("w8a16", "nvrtc", 90, 90, 1, 256)
        f = s.facts
        assert (f.family, f.path, f.dequant, f.bn) == ("wgmma", path, "w8", 128)
        assert f.m_tiles == tuple((bm, bm) for bm in sorted(wg_w8a16.W8_TILES))
        assert registry.catalogue()[name].facts == f


def test_the_profiler_lists_them_and_skips_them_below_sm_90():
    specs = select_kernels(schemes=["w8a16"])
    names = {s.name for s in specs}
    assert {"wg_w8a16", "wg_w8a16_bf16", "w8a16_tc_gemv"} <= names
    from workbench.measure.profiler import Shape

    points = plan(specs, [Shape("", 4096, 4096)], [64, 256], cc=90)
    assert {(p.spec.name, p.M) for p in points} >= {("wg_w8a16", 64), ("wg_w8a16_bf16", 256)}
    assert not [p for p in plan(specs, [Shape("", 4096, 4096)], [64], cc=80) if p.spec.name.startswith("wg_")]
    assert any(line.startswith("wg_w8a16 needs sm_90 only") for line in unsupported(specs, 80))


def test_the_gpu_tests_forced_tiles_each_fit_two_cases():
    """tests/test_wg_w8a16_gpu.py skips a forced tile where its shared memory cannot hold the batch tile; each form it
    lists must still run at two cases (a 6-stage 256-byte tile at BM = 128 asks 246,784 bytes and ran at none)."""
    from tests.test_wg_w8a16_gpu import OTHER_TILES, TILE_CASES

    for tile in OTHER_TILES:
        ran = 0
        for name in ("wg_w8a16", "wg_w8a16_bf16"):
            runner = wg_w8a16.make_runner(registry.get(name), tile=wgmma.parse_tile(tile))
            for M, (N, K) in TILE_CASES:
                try:
                    runner.check(M, N, K)
                except InputError:
                    continue
                ran += 1
        assert ran >= 2, tile

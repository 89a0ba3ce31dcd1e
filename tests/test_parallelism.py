"""The grid accounting (models/parallelism.py) against grids counted by hand: CTAs from the kernels' declared tiles,
the busiest SM's load and waves, on 132, 130 and 108 SMs."""

from __future__ import annotations

import numpy as np
import pytest

from models.kernel_terms import KernelFacts
from models.parallelism import declares_grid, grid_ctas, idle_stretch, sm_load, waves

BIG = 1 << 30
TC_GEMV = KernelFacts("gemv", "mma_sync_f16", m_tiles=((8, 8), (16, 16)), bn=16)  # one CTA per 16 channels
STREAM_K = KernelFacts("mma_sync", "mma_sync_f16", m_tiles=((256, 64),), bn=128, stream_k_ctas=((BIG, 1),))
WG = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((256, 256),), bn=128, stream_k_ctas=((BIG, 1),), aligned_grid=0.8,
                 cluster_grid=0.4)
H200_RESIDENT = {2: 66, 3: 39, 4: 30}


def _one(f, M, N, sms, resident=None):
    return float(grid_ctas(f, np.array([M]), np.array([N]), sms, resident)[0]), float(
        sm_load(f, np.array([M]), np.array([N]), sms, resident)[0])


def test_one_cta_per_tile_by_hand():
    # 1536 / 16 = 96 CTAs on 132 SMs: each busy SM carries 132 / 96 = 1.375 of an even share
    assert _one(TC_GEMV, 1, 1536, 132) == (96.0, pytest.approx(1.375))
    # 4096 / 16 = 256 CTAs: ceil(256 / 132) = 2 on the busiest SM against 256 / 132 on average: 264 / 256
    assert _one(TC_GEMV, 16, 4096, 132) == (256.0, pytest.approx(264 / 256))
    # the same layer on 108 SMs: 96 CTAs -> 108 / 96; 8960 / 16 = 560 CTAs -> ceil(560 / 108) = 6: 648 / 560
    assert _one(TC_GEMV, 1, 1536, 108)[1] == pytest.approx(108 / 96)
    assert _one(TC_GEMV, 1, 8960, 108)[1] == pytest.approx(648 / 560)
    # a whole number of CTAs per SM: no load
    assert _one(TC_GEMV, 1, 16 * 264, 132)[1] == pytest.approx(1.0)


def test_stream_k_fills_its_slots():
    # M = 256 in 64-row m-tiles: 4 passes, floor(132 / 4) = 33 CTAs each: 132 CTAs, every SM busy
    assert _one(STREAM_K, 256, 4096, 132) == (132.0, pytest.approx(1.0))
    # on 130 SMs floor(130 / 4) = 32 per m-tile: 128 CTAs, load 130 / 128
    assert _one(STREAM_K, 256, 4096, 130) == (128.0, pytest.approx(130 / 128))


def test_aligned_and_clustered_grids_leave_sms_idle():
    # 6144 channels: 48 tiles; aligned: 2 x 48 = 96 < 0.8 x 132, not taken; clustered in pairs: 96 CTAs (48 <= 66
    # resident pairs, 96 >= 0.4 x 132; 3 x 48 = 144 > 132 slots) -> load 132 / 96
    assert _one(WG, 256, 6144, 132, H200_RESIDENT) == (96.0, pytest.approx(1.375))
    # 28672 channels: 224 tiles > 132 slots; 2 whole tiles per CTA (224 >= 0.8 x 2 x 132): 112 CTAs -> 132 / 112
    assert _one(WG, 256, 28672, 132, H200_RESIDENT) == (112.0, pytest.approx(132 / 112))
    # without the cluster path 6144 runs stream-K over all 132 slots
    no_cluster = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((256, 256),), bn=128, stream_k_ctas=((BIG, 1),),
                             aligned_grid=0.8)
    assert _one(no_cluster, 256, 6144, 132) == (132.0, pytest.approx(1.0))


def test_undeclared_grids_fill_the_gpu():
    gemv = KernelFacts("gemv", "cuda_core", m_tiles=((1, 1), (16, 16)), cuda_core_rows=True)
    library = KernelFacts("library", "mma_sync_f16", "w4", ((16, 16), (256, 128)), 128)  # split-K by heuristics
    for f in (gemv, library):
        assert not declares_grid(f)
        ctas, load = _one(f, 16, 1536, 132)
        assert np.isnan(ctas) and load == 1.0
    assert declares_grid(TC_GEMV) and declares_grid(STREAM_K)


def test_waves():
    # 560 CTAs, 132 SMs: one resident per SM -> 5 waves; two -> ceil(560 / 264) = 3
    assert waves(TC_GEMV, np.array([1]), np.array([8960]), 132).tolist() == [5.0]
    assert waves(TC_GEMV, np.array([1]), np.array([8960]), 132, 2).tolist() == [3.0]


# w4a16_tc_gemv's TABLE as its declared fact: one n-tile per CTA at M <= 8, two at M 9-16 in every column
W4_TC = KernelFacts("gemv", "mma_sync_f16", "w4", ((8, 8), (16, 16)), bn=16,
                    cta_tiles=((8, ((4, 1), (BIG, 1))), (16, ((2.5, 2), (5, 2), (BIG, 2)))))
# w8a16_tc_gemv's: at M 9-16 four n-tiles per CTA beyond 4 n-tiles per SM, at M 17-32 two everywhere
W8_TC = KernelFacts("gemv", "mma_sync_f16", "w8", ((8, 8), (16, 16), (32, 32)), bn=16,
                    cta_tiles=((8, ((BIG, 1),)), (16, ((4, 1), (BIG, 4))), (32, ((4, 2), (BIG, 2)))))


def test_tiles_per_cta_from_the_declared_table_by_hand():
    # 896 channels = 56 n-tiles: 1 per CTA at M = 8 (56 CTAs), 2 at M = 16 (28 CTAs): 132 / 28 on the busiest SM
    assert _one(W4_TC, 8, 896, 132) == (56.0, pytest.approx(132 / 56))
    assert _one(W4_TC, 16, 896, 132) == (28.0, pytest.approx(132 / 28))
    # the column follows the SM count: 8192 channels = 512 n-tiles, 3.88 per SM on 132 SMs (<= 4: one per CTA, 512
    # CTAs), 4.74 on 108 (four per CTA: 128 CTAs); 17-32 two per CTA: 3584 channels, 224 n-tiles -> 112 CTAs
    assert W8_TC.tiles_per_cta(np.array([16]), np.array([8192]), 132).tolist() == [1.0]
    assert W8_TC.tiles_per_cta(np.array([16]), np.array([8192]), 108).tolist() == [4.0]
    assert _one(W8_TC, 16, 8192, 108)[0] == 128.0
    assert _one(W8_TC, 32, 3584, 132)[0] == 112.0
    # without the fact (or past the table's last M): one n-tile per CTA
    assert TC_GEMV.tiles_per_cta(np.array([16]), np.array([896]), 132).tolist() == [1.0]
    assert W4_TC.tiles_per_cta(np.array([64]), np.array([896]), 132).tolist() == [1.0]


def test_idle_stretch_by_hand():
    M, N = np.array([2, 16, 16, 16]), np.array([896, 896, 1536, 4096])
    # 56 CTAs -> 132 / 56; 28 -> 132 / 28; 1536: 96 n-tiles, 2 per CTA: 48 CTAs; 4096: 128 CTAs -> 132 / 128
    assert idle_stretch(W4_TC, M, N, 132).tolist() == pytest.approx([132 / 56, 132 / 28, 132 / 48, 132 / 128])
    # at least as many CTAs as SMs: 1 (the uneven ceil(C / S) is not charged); 108 SMs: 4096 -> 128 CTAs >= 108
    assert idle_stretch(W4_TC, np.array([2]), np.array([4096]), 132).tolist() == [1.0]
    assert idle_stretch(W4_TC, np.array([16]), np.array([4096]), 108).tolist() == [1.0]
    # persistent grids and undeclared grids: never stretched
    for f in (STREAM_K, WG, KernelFacts("gemv", "cuda_core", m_tiles=((16, 16),), cuda_core_rows=True)):
        assert idle_stretch(f, np.array([256]), np.array([896]), 132).tolist() == [1.0]


def test_raw_terms_stretch_the_per_sm_terms_not_the_reads():
    from models.kernel_model import raw_terms
    from models.kernel_terms import GpuTerms

    gpu = GpuTerms("test", np.array([4096.0, 1e6, 1e9]), np.array([2e-6, 3e-6, 1003e-6]),
                   {"w4": 1e13, "w8": 2e13, "e4m3": 4e13}, fma_per_s=1e13,
                   path_flops={"cuda_core": 2e13, "mma_sync_f16": 1e15}, sources={}, sms=132)
    M, N, K, V = np.array([16.0]), np.array([896.0]), np.array([4864.0]), np.array([3e6])
    t = raw_terms(W4_TC, gpu, M, N, K, V)
    one = raw_terms(KernelFacts("gemv", "mma_sync_f16", "w4", ((8, 8), (16, 16)), bn=16), gpu, M, N, K, V)
    # the same kernel with one n-tile per CTA: 56 CTAs (132 / 56) against 28 (132 / 28): the alu and tensor terms
    # double, the read does not move
    assert t.memory[0] == one.memory[0]
    assert t.dequant[0] == pytest.approx(896 * 4864 / 1e13 * 132 / 28)
    assert t.tensor[0] == pytest.approx(2 * 16 * 896 * 4864 / 1e15 * 132 / 28)
    assert t.tensor[0] == pytest.approx(2 * one.tensor[0])


def test_declared_cta_tiles_match_the_launchers_choice():
    from kernels.tcgemv import tc_gemv, tc_gemv_f16, tc_gemv_q8, tc_gemv_w8a16
    from models.kernel_catalogue import shipped

    cases = [("w4a16_tc_gemv", lambda M, N, s: tc_gemv.choose_config(M, N, s)),
             ("w8a16_tc_gemv", lambda M, N, s: tc_gemv_w8a16.choose_config(M, N, s)),
             ("bf16_tc_gemv", lambda M, N, s: tc_gemv_f16.choose_config(M, N, s)),
             ("fp8_tc_gemv", lambda M, N, s: tc_gemv_q8.choose_config(M, N, s, name="fp8_tc_gemv"))]
    for name, choose in cases:
        f = shipped()[name].facts
        for sms in (58, 108, 132, 142):
            for N in (896, 1536, 4096, 8192, 22016):
                for M in range(1, shipped()[name].m_max + 1):
                    got = f.tiles_per_cta(np.array([M]), np.array([N]), sms)[0]
                    assert got == choose(M, N, sms).tiles, (name, sms, N, M)


def test_cta_tiles_refuses_bad_tables():
    from models.errors import InputError

    with pytest.raises(InputError, match="cta_tiles"):
        KernelFacts("gemv", "mma_sync_f16", bn=16, cta_tiles=((16, ((4, 0),)),))
    with pytest.raises(InputError, match="cta_tiles"):
        KernelFacts("gemv", "mma_sync_f16", bn=16, cta_tiles=((16, ((4, 1),)), (8, ((4, 1),))))

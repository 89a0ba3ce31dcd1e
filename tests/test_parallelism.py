"""The grid accounting (models/parallelism.py) against grids counted by hand: CTAs from the kernels' declared tiles,
the busiest SM's load and waves, on 132, 130 and 108 SMs."""

from __future__ import annotations

import numpy as np
import pytest

from models.kernel_terms import KernelFacts
from models.parallelism import declares_grid, grid_ctas, sm_load, waves

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

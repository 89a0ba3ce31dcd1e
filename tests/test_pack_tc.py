"""CPU tests of the tensor-core kernels' W4A16 reorder, their tile choice and shape refusals."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import pack_tc, quant, registry, tensorcore
from models.errors import InputError


@pytest.mark.parametrize("N,K", [(128, 128), (256, 384), (384, 1024)])
def test_pack_codes_round_trip(N, K):
    q = quant.random_w4(N, K, 128, seed=N + K)
    words = pack_tc.pack_codes(q.codes)
    assert words.dtype == np.uint32 and words.size == N * K // 8
    assert np.array_equal(pack_tc.unpack_codes(words, N, K), q.codes)


def test_pack_matches_the_kernels_fragment_reads():
    """Every weight sits where the kernel's index and bit arithmetic looks for it."""
    N, K = 256, 384
    q = quant.random_w4(N, K, 128, seed=7)
    words = pack_tc.pack_codes(q.codes)
    for n in range(N):
        for k in range(0, K, 5):
            assert pack_tc.fragment_code(words, N, K, n, k) == q.codes[n, k], (n, k)


def test_pack_is_not_the_identity_layout():
    q = quant.random_w4(128, 256, 128, seed=3)
    assert not np.array_equal(pack_tc.pack_codes(q.codes), quant.pack_w4_reference(q.codes).reshape(-1))


def test_scale_zero_round_trip():
    q = quant.random_w4(256, 512, 128, seed=11)
    packed = pack_tc.pack_scale_zero(q.scales, q.zeros)
    assert packed.dtype == np.float16 and packed.size == 256 * 4 * 2
    s, z = pack_tc.unpack_scale_zero(packed, 256, 512)
    assert np.array_equal(s, q.scales) and np.array_equal(z, q.zeros)
    # block (nt=1, kt=2), warp 3, lane group 5, n-fragment 2 -> column 128 + 96 + 16 + 5
    entry = ((1 * 4 + 2) * 128 + (3 * 8 + 5) * 4 + 2) * 2
    assert packed[entry] == q.scales[128 + 96 + 16 + 5, 2] and packed[entry + 1] == q.zeros[128 + 96 + 16 + 5, 2]


def test_pack_w4_dequantizes_like_the_canonical_codes():
    w = np.random.default_rng(0).standard_normal((128, 256))
    q = quant.quantize_w4(w, 128)
    p = pack_tc.pack_w4(q)
    back = quant.W4(pack_tc.unpack_codes(p.words, 128, 256), *pack_tc.unpack_scale_zero(p.scale_zero, 128, 256), 128)
    assert np.array_equal(quant.dequantize_w4(back), quant.dequantize_w4(q))


@pytest.mark.parametrize("N,K,G", [(100, 128, 128), (128, 200, 128), (128, 256, 64)])
def test_pack_refuses_unsupported_shapes(N, K, G):
    with pytest.raises(InputError):
        pack_tc.check_tc_w4_shape(N, K, G)


@pytest.mark.parametrize("scheme", ["bf16", "fp16", "w4a16", "w8a8", "fp8"])
def test_tile_config_covers_every_batch(scheme):
    for M in range(16, 257):
        cfg = tensorcore.tile_config(scheme, M)
        assert cfg.bm * cfg.m_tiles >= M
        assert cfg.bm * (cfg.m_tiles - 1) < M  # no empty m-tile
        assert cfg.smem_bytes <= 227 * 1024


def test_grid_never_exceeds_the_iterations():
    assert tensorcore.grid_ctas(tiles_n=2, ktiles=3, m_tiles=1, sms=132, per_sm=2) == 6
    assert tensorcore.grid_ctas(tiles_n=172, ktiles=64, m_tiles=2, sms=132, per_sm=2) == 132


@pytest.mark.parametrize("spec", tensorcore.SPECS, ids=lambda s: s.name)
def test_runner_refuses_bad_shapes(spec):
    runner = tensorcore.make_runner(spec)
    runner.check(16, 4096, 4096)
    for M, N, K in ((8, 4096, 4096), (257, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000), (16, 0, 4096)):
        with pytest.raises(InputError):
            runner.check(M, N, K)


def test_specs_are_registered():
    names = {s.name for s in registry.specs()}
    assert {s.name for s in tensorcore.SPECS} <= names
    fp8 = registry.get("tc_fp8")
    assert "NOT native" in fp8.notes and fp8.m_min == 16 and fp8.m_max == 256

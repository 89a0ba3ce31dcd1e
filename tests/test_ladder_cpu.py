"""The W4A16 ladder on the CPU: the rung table, the registry entries, the K-tiles of the staged x, and a NumPy
emulation of what each rung's kernel computes from its layout (kernels/gemv/gemv_w4_ladder.cu: the nibble pairs the
0x6400 magic number yields, the byte permutes that pair x with them, the padded shared-memory addresses)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import registry
from kernels.gemv import gemv, ladder, xstage
from kernels.quant import pack_w4, quant
from models.errors import InputError


def test_rungs_are_ordered_and_registered():
    assert [r.index for r in ladder.RUNGS] == list(range(len(ladder.RUNGS)))
    names = {s.name: s for s in registry.specs()}
    for r in ladder.RUNGS:
        assert r.trick and r.adds and r.kernels
        for k in r.kernels:
            assert k in names and names[k].scheme == "w4a16", k
    assert ladder.RUNGS[0].kernels == ("gemv_w4_ref",) and ladder.RUNGS[4].kernels == ("w4a16_gemv",)
    assert ladder.RUNGS[-1].m_from == 1 and "w4a16_tc_gemv" in ladder.RUNGS[-1].kernels  # tensor cores from M = 1
    for s in ladder.SPECS:
        assert s.role == "ladder" and s.facts is not None and s.m_max == 16 and s.source == ladder.SOURCE
        assert ladder.rung_of(s.name).kernels[0] == s.name
    assert ladder.rung_of("cublas_bf16") is None


def test_shape_refusals():
    spec = registry.get("ladder_w4_magic")
    ladder.check_shape(spec, 16, 4096, 4096, 128)
    for M, N, K, G in ((0, 64, 256, 128), (17, 64, 256, 128), (1, 64, 272, 16), (1, 64, 200, 8), (1, 0, 256, 128),
                       (1, 64, 384, 256), (1, 64, 256, 48)):
        with pytest.raises(InputError):
            ladder.check_shape(spec, M, N, K, G)


@pytest.mark.parametrize("K", [256, 640, 4096, 11008, 8192, 16512, 28672])
def test_x_tiles_fit_and_cover_k(K):
    for name in ladder.DEFS:
        d = ladder.DEFS[name]
        for mb in gemv.MB_BINS:
            kt, smem = ladder.x_tile(name, mb, K)
            assert kt == K or (kt % xstage.X_TILE_QUANTUM == 0 and kt >= ladder.MIN_TILE)
            assert kt % 32 == 0 and 0 < kt <= K
            assert smem == mb * (kt + kt // 32 * d.pad) * d.elem_bytes
            assert smem <= xstage.SMEM_BUDGET or kt == ladder.MIN_TILE
            assert smem <= 227 * 1024  # the H200's opt-in limit per block
    for mb in gemv.MB_BINS:  # the chapter's kernels: one tile at M = 1 whenever K floats fit in 48 KB
        kt = xstage.x_tile(K, mb, 4)
        assert xstage.x_smem_bytes(kt, mb, 4) <= xstage.SMEM_BUDGET
        assert kt == K if mb * K * 4 <= xstage.SMEM_BUDGET else kt % xstage.X_TILE_QUANTUM == 0


def test_padded_staging_addresses():
    """Staged x (16-byte pieces, PAD after every 32) is read back at c * (32 + PAD) + q * 8 + j, distinct and in
    bounds, 16-byte aligned, and a quarter-warp's 16-byte reads of one q hit 8 distinct 16-byte bank groups."""
    for name, d in ladder.DEFS.items():
        for mb, K in ((1, 4096), (3, 11008), (16, 8192)):
            kt, smem = ladder.x_tile(name, mb, K)
            ldx = kt + (kt >> 5) * d.pad
            k = np.arange(kt)
            addr = np.concatenate([m * ldx + k + (k >> 5) * d.pad for m in range(mb)])
            assert len(np.unique(addr)) == addr.size and addr.max() * d.elem_bytes < smem
            c, rem = k // 32, k % 32
            assert np.array_equal(k + (k >> 5) * d.pad, c * (32 + d.pad) + (rem // 8) * 8 + rem % 8)
            assert (ldx * d.elem_bytes) % 16 == 0 and ((32 + d.pad) * d.elem_bytes) % 16 == 0
            lanes = np.arange(8)
            slots = (lanes * (32 + d.pad) * d.elem_bytes) % 128 // 16
            assert len(set(slots.tolist())) == 8, name


def _h2(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) fp16 halves of uint32 words as float64."""
    w = words.astype(np.uint32)
    lo = (w & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    hi = (w >> 16).astype(np.uint16).view(np.float16).astype(np.float64)
    return lo, hi


def _byte_perm(a: np.ndarray, b: np.ndarray, sel: int) -> np.ndarray:
    """CUDA __byte_perm(a, b, sel) for selectors 0..7 per byte."""
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = np.zeros_like(a, dtype=np.uint32)
    for i in range(4):
        out |= src[(sel >> (4 * i)) & 0x7].astype(np.uint32) << np.uint32(8 * i)
    return out


def _magic(words: np.ndarray, shift: int) -> np.ndarray:
    return ((words >> np.uint32(shift)) & np.uint32(0x000F000F)) | np.uint32(0x64006400)


def _emulate(name: str, q: quant.W4, x: np.ndarray, swap_layouts: bool = False) -> np.ndarray:
    """y (M x N) as the rung's kernel computes it from its layout (products in float64: the layout is what is
    checked here, the rounding is the GPU test's). `swap_layouts` feeds each half2 rung the other rung's packing."""
    N, K = q.codes.shape
    G = q.group_size
    s = q.scales.astype(np.float64)
    z = q.zeros.astype(np.float64)
    xh = x.astype(np.float16)
    xw = np.ascontiguousarray(xh).view(np.uint32)  # M x K/2: half pairs (2i, 2i + 1)
    y = np.zeros((x.shape[0], N))
    if name == "ladder_w4_vec16":
        words = quant.pack_w4_reference(q.codes).reshape(N, K // 32, 4)
        for c in range(K // 32):
            g = c * 32 // G
            for qq in range(4):
                for j in range(8):
                    w = ((words[:, c, qq] >> np.uint32(4 * j)) & 0xF).astype(np.float64)
                    y += np.outer(x[:, c * 32 + qq * 8 + j], (w - z[:, g]) * s[:, g])
        return y
    if name == "ladder_w4_magic":
        pack = pack_w4.pack_w4_fast if swap_layouts else quant.pack_w4_reference
        words = pack(q.codes).reshape(N, K // 32, 4)
        for c in range(K // 32):
            g = c * 32 // G
            zh = 1024.0 + z[:, g]
            for qq in range(4):
                base = (c * 32 + qq * 8) // 2  # x words (pairs) of this 8-weight word: base .. base + 3
                xv = [xw[:, base + i] for i in range(4)]
                pairs = [_byte_perm(xv[0], xv[2], 0x5410), _byte_perm(xv[0], xv[2], 0x7632),
                         _byte_perm(xv[1], xv[3], 0x5410), _byte_perm(xv[1], xv[3], 0x7632)]
                for p in range(4):
                    dlo, dhi = _h2(_magic(words[:, c, qq], 4 * p))
                    xlo, xhi = _h2(pairs[p])
                    y += np.outer(xlo, (dlo - zh) * s[:, g]) + np.outer(xhi, (dhi - zh) * s[:, g])
        return y
    words_r, sz = pack_w4.pack_w4a16(q)
    if swap_layouts:
        words_r = quant.pack_w4_reference(q.codes)
    words_r = words_r.reshape(N, K // 32, 4)
    for c in range(K // 32):
        g = c * 32 // G
        s_lo, zh_hi = _h2(sz[:, g])
        zh = _h2(_byte_perm(sz[:, g], sz[:, g], 0x3232))[0]
        assert np.array_equal(zh, zh_hi)
        for qq in range(4):
            base = (c * 32 + qq * 8) // 2
            for i in range(4):
                dlo, dhi = _h2(_magic(words_r[:, c, qq], 4 * i))
                xlo, xhi = _h2(xw[:, base + i])
                y += np.outer(xlo, (dlo - zh) * s_lo) + np.outer(xhi, (dhi - zh) * s_lo)
    return y


@pytest.mark.parametrize("name", list(ladder.DEFS))
@pytest.mark.parametrize("G", [32, 128])
def test_layout_emulation_matches_reference(name, G):
    rng = np.random.default_rng(G)
    N, K, M = 7, 256, 3
    w = rng.standard_normal((N, K)) * 0.05
    q = quant.quantize_w4(w, G)
    x = rng.standard_normal((M, K)).astype(np.float32)
    xk = x.astype(np.float64) if ladder.DEFS[name].x_kind == "f32" else x.astype(np.float16).astype(np.float64)
    ref = xk @ quant.dequantize_w4(q).astype(np.float64).T
    got = _emulate(name, q, x)
    assert np.allclose(got, ref, rtol=1e-12, atol=1e-12), np.abs(got - ref).max()
    if name != "ladder_w4_vec16":  # the emulation sees a wrong pairing: the other half2 rung's packing fails
        assert not np.allclose(_emulate(name, q, x, swap_layouts=True), ref, rtol=1e-3)

"""The 8-bit tensor-core GEMV's weight layout (kernels/quant/pack_q8.py) on CPU: gemv_q8_tc.cu replayed lane by lane in
NumPy with PTX's m16n8k32 fragment layout (A: a lane's register r holds row g + 8 (r % 2), columns 4 t + 16 (r // 2)
+ 0..3; B: register r holds column g, rows 4 t + 16 r + 0..3; C: c_i at row g + 8 (i // 2), column 2 t + i % 2), fed
with the packed words and the x bytes the kernel loads. Integer codes make the check exact."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.quant import pack_q8
from models.errors import InputError


def _bytes(word: np.uint32) -> np.ndarray:
    return np.array([(int(word) >> (8 * i)) & 0xFF for i in range(4)], dtype=np.uint8).view(np.int8).astype(np.int64)


def _padded(x: np.ndarray) -> np.ndarray:
    """x with its batch rows padded to whole n-tiles of 8 (zeros), as int64."""
    xp = np.zeros((-(-x.shape[0] // 8) * 8, x.shape[1]), dtype=np.int64)
    xp[:x.shape[0]] = x
    return xp


def _accumulate(y: np.ndarray, D: np.ndarray, j: int, tile: int) -> None:
    """Add one mma's D [16 channels, 8 batch rows] to y through the C fragment (c_i of lane (g, t) at channel
    g + 8 (i // 2), batch row 2 t + i % 2), as reduce_tiles reads it."""
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            y[8 * j + 2 * t + i % 2, 16 * tile + g + 8 * (i // 2)] += D[g + 8 * (i // 2), 2 * t + i % 2]


def _emulate(words: np.ndarray, x: np.ndarray, N: int) -> np.ndarray:
    """y [M, N] = what the kernel sums: per row tile, chunk, k-step and n-tile one m16n8k32 from the lanes'
    registers."""
    T, C = words.shape[:2]
    xp = _padded(x)
    y = np.zeros((xp.shape[0], T * 16), dtype=np.int64)
    for tile in range(T):
        for c in range(C):
            for s in range(2):
                for j in range(xp.shape[0] // 8):
                    A = np.zeros((16, 32), dtype=np.int64)
                    B = np.zeros((32, 8), dtype=np.int64)
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        regs = words[tile, c, s, lane]
                        for r in range(4):
                            A[g + 8 * (r % 2), 4 * t + 16 * (r // 2):4 * t + 16 * (r // 2) + 4] = _bytes(regs[r])
                        k0 = 64 * c + 16 * t + 8 * s
                        xb = xp[8 * j + g, k0:k0 + 8]  # the half of the lane's 16-byte load of x for this k-step
                        B[4 * t:4 * t + 4, g] = xb[:4]
                        B[16 + 4 * t:16 + 4 * t + 4, g] = xb[4:]
                    _accumulate(y, A @ B, j, tile)
    return y[:x.shape[0], :N]


@pytest.mark.parametrize(("M", "N", "K"), [(1, 16, 64), (3, 37, 192), (9, 20, 128)])
def test_the_kernels_fragments_compute_x_times_w(M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M * 100 + N)
    w = rng.integers(-128, 128, size=(N, K), dtype=np.int8)
    x = rng.integers(-128, 128, size=(M, K), dtype=np.int8)
    words = pack_q8.pack_q8_tc(w)
    assert words.shape == (-(-N // 16), K // 64, 2, 32, 4) and words.dtype == np.uint32
    np.testing.assert_array_equal(_emulate(words, x, N), x.astype(np.int64) @ w.astype(np.int64).T)


def _emulate_f16(words: np.ndarray, x: np.ndarray, N: int) -> np.ndarray:
    """The Q8_F16 path: per k-step two m16n8k16 (A: register r holds row g + 8 (r % 2), columns 2 t + 8 (r // 2) +
    0..1; B: register r holds column g, rows 2 t + 8 r + 0..1) fed as compute_chunk feeds them, the e4m3 -> f16
    conversion standing in as the identity on integer codes."""
    T, C = words.shape[:2]
    xp = _padded(x)
    y = np.zeros((xp.shape[0], T * 16), dtype=np.int64)
    for tile in range(T):
        for c in range(C):
            for s in range(2):
                for j in range(xp.shape[0] // 8):
                    for half in range(2):  # the first mma: words 0, 1 and x word 2s; the second: 2, 3 and 2s + 1
                        A = np.zeros((16, 16), dtype=np.int64)
                        B = np.zeros((16, 8), dtype=np.int64)
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            wg, wg8 = (_bytes(words[tile, c, s, lane, 2 * half + h]) for h in range(2))
                            f = (wg[:2], wg8[:2], wg[2:], wg8[2:])  # a0..a3 = f[0], f[2], f[1], f[3] of the kernel
                            for r, pair in enumerate(f):
                                A[g + 8 * (r % 2), 2 * t + 8 * (r // 2):2 * t + 8 * (r // 2) + 2] = pair
                            k0 = 64 * c + 16 * t + 8 * s + 4 * half
                            xb = xp[8 * j + g, k0:k0 + 4]
                            B[2 * t:2 * t + 2, g] = xb[:2]
                            B[2 * t + 8:2 * t + 10, g] = xb[2:]
                        _accumulate(y, A @ B, j, tile)
    return y[:x.shape[0], :N]


@pytest.mark.parametrize(("M", "N", "K"), [(1, 16, 64), (11, 37, 192)])
def test_the_f16_path_computes_x_times_w_from_the_same_words(M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M + N)
    w = rng.integers(-128, 128, size=(N, K), dtype=np.int8)
    x = rng.integers(-128, 128, size=(M, K), dtype=np.int8)
    np.testing.assert_array_equal(_emulate_f16(pack_q8.pack_q8_tc(w), x, N), x.astype(np.int64) @ w.astype(np.int64).T)


def test_unpack_inverts_pack_and_pads_with_zero_codes() -> None:
    w = np.random.default_rng(1).integers(0, 256, size=(37, 256), dtype=np.uint8)
    words = pack_q8.pack_q8_tc(w)
    np.testing.assert_array_equal(pack_q8.unpack_q8_tc(words, 37), w)
    assert not pack_q8.unpack_q8_tc(words, 48)[37:].any()


def test_a_swapped_k_step_is_caught() -> None:
    """The emulation is sensitive to the layout: the two k-steps of every lane exchanged no longer give x W^T."""
    rng = np.random.default_rng(2)
    w = rng.integers(-128, 128, size=(16, 128), dtype=np.int8)
    x = rng.integers(-128, 128, size=(2, 128), dtype=np.int8)
    words = pack_q8.pack_q8_tc(w)[:, :, ::-1]
    assert not np.array_equal(_emulate(np.ascontiguousarray(words), x, 16), x.astype(np.int64) @ w.astype(np.int64).T)


@pytest.mark.parametrize(("codes", "needle"), [(np.zeros((4, 100), np.uint8), "divisible by 64"),
                                               (np.zeros((4, 64), np.float16), "1-byte"),
                                               (np.zeros(64, np.uint8), "2-D")])
def test_bad_codes_are_refused_in_one_line(codes: np.ndarray, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        pack_q8.pack_q8_tc(codes)

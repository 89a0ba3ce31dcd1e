"""The 16-bit tensor-core GEMVs' host side on CPU: the offline layout replayed through the mma's fragment layout,
the configuration table, refusals, compile options, declared facts."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import registry
from kernels.tcgemv import tc_gemv_f16
from models.errors import InputError


def _words(packed: np.ndarray, tile: int, chunks: int, c: int, lane: int) -> list[np.ndarray]:
    """The four 16-byte words lane `lane` loads for chunk c of row tile `tile` (load_chunk), as 8 values each."""
    w = packed.reshape(-1, 8)
    return [w[((tile * chunks + c) * 4 + j) * 32 + lane].astype(np.float64) for j in range(4)]


def replay(packed: np.ndarray, x: np.ndarray, N: int, K: int) -> np.ndarray:
    """y = x . W^T computed the way gemv_f16_tc.cu does: per chunk and k-step s = 2 h + q, every lane's A registers
    (a0..a3 = words 2h and 2h+1, halves q) and B registers (x of batch row g at k 64 c + 32 h + 8 t + 4 q ..) placed
    where PTX's m16n8k16 fragment layout puts them, then C += A . B (fp64)."""
    M = x.shape[0]
    tiles, chunks = -(-N // 16), K // 64
    y = np.zeros((M, tiles * 16))
    xp = np.zeros((-(-M // 8) * 8, K))
    xp[:M] = x
    for tile in range(tiles):
        for c in range(chunks):
            words = [_words(packed, tile, chunks, c, lane) for lane in range(32)]
            for h in range(2):
                for q in range(2):
                    A = np.zeros((16, 16))
                    for lane in range(32):
                        g, t = divmod(lane, 4)
                        lo, hi = words[lane][2 * h], words[lane][2 * h + 1]  # channels g and g + 8
                        A[g, 2 * t:2 * t + 2] = lo[4 * q:4 * q + 2]  # a0
                        A[g + 8, 2 * t:2 * t + 2] = hi[4 * q:4 * q + 2]  # a1
                        A[g, 2 * t + 8:2 * t + 10] = lo[4 * q + 2:4 * q + 4]  # a2
                        A[g + 8, 2 * t + 8:2 * t + 10] = hi[4 * q + 2:4 * q + 4]  # a3
                    for j in range(xp.shape[0] // 8):
                        B = np.zeros((16, 8))
                        for lane in range(32):
                            g, t = divmod(lane, 4)
                            k0 = 64 * c + 32 * h + 8 * t + 4 * q
                            B[2 * t:2 * t + 2, g] = xp[8 * j + g, k0:k0 + 2]  # b0
                            B[2 * t + 8:2 * t + 10, g] = xp[8 * j + g, k0 + 2:k0 + 4]  # b1
                        rows = min(8, M - 8 * j)  # C is channels x batch rows; y is batch rows x channels
                        y[8 * j:8 * j + rows, tile * 16:tile * 16 + 16] += (A @ B).T[:rows]
    return y[:, :N]


@pytest.mark.parametrize(("M", "N", "K"), [(1, 16, 64), (3, 37, 192), (11, 101, 128), (16, 48, 256)])
def test_the_layout_through_the_fragments_is_the_product(M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M * 1000 + N)
    w = rng.standard_normal((N, K)).astype(np.float16)
    x = rng.standard_normal((M, K)).astype(np.float16).astype(np.float64)
    y = replay(tc_gemv_f16.pack_f16_tc(w), x, N, K)
    ref = x @ w.astype(np.float64).T
    assert np.abs(y - ref).max() <= 1e-9 * np.abs(ref).max()


def test_a_layout_with_two_words_exchanged_is_caught() -> None:
    rng = np.random.default_rng(3)
    N, K, M = 32, 128, 5
    w = rng.standard_normal((N, K)).astype(np.float16)
    x = rng.standard_normal((M, K))
    packed = tc_gemv_f16.pack_f16_tc(w).reshape(-1, 4, 32, 8).copy()
    packed[:, [0, 1]] = packed[:, [1, 0]]  # channel g and g + 8 swapped in the k 0..31 half
    y = replay(packed.reshape(-1), x, N, K)
    assert np.abs(y - x @ w.astype(np.float64).T).max() > 1e-2


def test_packing_pads_the_last_tile_with_zeros_and_keeps_the_dtype() -> None:
    w = np.arange(20 * 64, dtype=np.uint16).reshape(20, 64)
    p = tc_gemv_f16.pack_f16_tc(w)
    assert p.dtype == np.uint16 and p.size == 32 * 64
    assert sorted(p[p > 0].tolist()) == sorted(w[w > 0].tolist())
    with pytest.raises(InputError, match="multiple of 64"):
        tc_gemv_f16.pack_f16_tc(np.zeros((16, 96), np.float16))
    with pytest.raises(InputError, match="16-bit"):
        tc_gemv_f16.pack_f16_tc(np.zeros((16, 64), np.float32))


@pytest.mark.parametrize(("M", "nt"), [(1, 1), (8, 1), (9, 2), (16, 2)])
def test_the_table_pads_the_batch_to_whole_n_tiles(M: int, nt: int) -> None:
    for N in (0, 4096, 22016):
        for name in tc_gemv_f16.KINDS:
            cfg = tc_gemv_f16.choose_config(M, N, name=name)
            assert cfg.nt == nt and 8 * cfg.nt >= M


@pytest.mark.parametrize("M", [0, 17, -1])
def test_batch_outside_the_kernel_is_refused_with_its_name(M: int) -> None:
    with pytest.raises(InputError, match=r"fp16_tc_gemv takes M in \[1, 16\]"):
        tc_gemv_f16.choose_config(M, name="fp16_tc_gemv")


def test_overrides_that_cannot_run_are_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="needs 8 \\* nt >= M"):
        tc_gemv_f16.choose_config(12, nt=1)
    with pytest.raises(InputError, match="u, tiles and minb >= 1"):
        tc_gemv_f16.choose_config(1, u=0)
    with pytest.raises(InputError, match="shared memory"):
        tc_gemv_f16.choose_config(16, warps=32, nt=4)
    with pytest.raises(InputError, match="no 16-bit tensor-core GEMV named 'bf16_gemv'"):
        tc_gemv_f16.choose_config(1, name="bf16_gemv")


def test_options_name_the_type_and_every_field() -> None:
    opts = tc_gemv_f16.Config(nt=2, warps=4, u=3, tiles=2, minb=2).options(True)
    assert opts == ("-DF16_BF16=1", "-DTCF_NT=2", "-DTCF_WARPS=4", "-DTCF_U=3", "-DTCF_TILES=2", "-DTCF_MINB=2")
    assert tc_gemv_f16.Config(nt=1).options(False)[0] == "-DF16_BF16=0"


@pytest.mark.parametrize(("N", "K", "needle"), [(64, 96, "multiple of 64"), (0, 128, "N >= 1"),
                                                (64, 0, "multiple of 64")])
def test_shapes_refused_before_anything_is_allocated(N: int, K: int, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        tc_gemv_f16.check_shape(registry.get("bf16_tc_gemv"), 1, N, K)


def test_declared_facts_are_the_kernels() -> None:
    for name, kind in tc_gemv_f16.KINDS.items():
        spec = registry.get(name)
        assert spec.scheme == kind.scheme and spec.m_max == tc_gemv_f16.M_MAX
        assert spec.facts.family == "gemv" and spec.facts.dequant == "none" and spec.facts.bn == 16
        assert spec.facts.path == ("mma_sync_bf16" if kind.bf16 else "mma_sync_f16")
        assert dict(spec.facts.m_tiles) == {8: 8, 16: 16}


def test_few_row_tiles_per_sm_take_the_few_column() -> None:
    (_, few), (_, many) = tc_gemv_f16.TABLE[1][1]
    assert few != many
    assert tc_gemv_f16.choose_config(16, 4096) == few and tc_gemv_f16.choose_config(16, 22016) == many
    assert tc_gemv_f16.choose_config(16, 6144) == many and tc_gemv_f16.choose_config(16, 0) == many
    assert tc_gemv_f16.choose_config(8, 4096) == tc_gemv_f16.choose_config(8, 22016)


def test_runners_refuse_a_kernel_of_another_family_and_misaligned_arrays() -> None:
    from types import SimpleNamespace

    from kernels import launch
    from kernels.tcgemv import tc_gemv_q8

    with pytest.raises(InputError, match="no 16-bit tensor-core GEMV named 'fp8_tc_gemv'"):
        tc_gemv_f16.TcGemvF16Runner(registry.get("fp8_tc_gemv"))
    with pytest.raises(InputError, match="no 8-bit tensor-core GEMV named 'bf16_tc_gemv'"):
        tc_gemv_q8.TcGemvQ8Runner(registry.get("bf16_tc_gemv"))

    def array(ptr: int, contiguous: bool = True) -> SimpleNamespace:
        return SimpleNamespace(flags=SimpleNamespace(c_contiguous=contiguous), data=SimpleNamespace(ptr=ptr))

    launch.check_aligned("k", (array(0), array(4096)))
    with pytest.raises(InputError, match="k: device arrays must be C-contiguous and 16-byte aligned"):
        launch.check_aligned("k", (array(0), array(8)))
    with pytest.raises(InputError, match="C-contiguous"):
        launch.check_aligned("k", (array(0, contiguous=False),))

"""The 8-bit tensor-core GEMVs' host side on CPU: configuration table, refusals, compile options, declared facts."""

from __future__ import annotations

import pytest

from kernels import registry
from kernels.tcgemv import tc_gemv, tc_gemv_q8
from models.errors import InputError


@pytest.mark.parametrize(("M", "nt"), [(1, 1), (8, 1), (9, 2), (16, 2)])
def test_the_table_pads_the_batch_to_whole_n_tiles(M: int, nt: int) -> None:
    for N in (0, 4096, 22016):
        cfg = tc_gemv_q8.choose_config(M, N)
        assert cfg.nt == nt and 8 * cfg.nt >= M


def test_few_row_tiles_per_sm_take_the_few_column() -> None:
    (_, few), (_, many) = tc_gemv_q8.TABLE[1][1]
    assert few != many
    limit = tc_gemv.FEW_TILES_PER_SM * 132 * 16

    def pick(N: int, sms: int = 132) -> tc_gemv_q8.Config:
        return tc_gemv_q8.choose_config(16, N, sms, "w8a8_tc_gemv")

    assert pick(4096) == few and pick(limit) == few and pick(limit + 1, sms=264) == few
    assert pick(limit + 1) == many and pick(0) == many


@pytest.mark.parametrize("M", [0, 17, -1])
def test_batch_outside_the_kernel_is_refused_with_its_name(M: int) -> None:
    with pytest.raises(InputError, match=r"w8a8_tc_gemv takes M in \[1, 16\]"):
        tc_gemv_q8.choose_config(M, name="w8a8_tc_gemv")


def test_overrides_that_cannot_run_are_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="needs 8 \\* nt >= M"):
        tc_gemv_q8.choose_config(12, nt=1)
    with pytest.raises(InputError, match="u, tiles and minb >= 1"):
        tc_gemv_q8.choose_config(1, u=0)
    with pytest.raises(InputError, match="shared memory"):
        tc_gemv_q8.choose_config(16, warps=32, nt=4)  # 32 warps x 16 channels x 32 rows x 4 bytes = 64 KB
    with pytest.raises(InputError, match="an int8 kernel has nothing to convert"):
        tc_gemv_q8.choose_config(16, name="w8a8_tc_gemv", f16=True)
    assert tc_gemv_q8.choose_config(16, name="fp8_tc_gemv", f16=False).f16 is False  # a benchmark's override
    with pytest.raises(InputError, match="no 8-bit tensor-core GEMV named 'fp8_gemv'"):
        tc_gemv_q8.choose_config(1, name="fp8_gemv")


def test_options_name_the_operand_type_and_every_field() -> None:
    opts = tc_gemv_q8.Config(nt=4, warps=4, u=3, tiles=2, minb=2).options(1)
    assert opts == ("-DQ8_S8=1", "-DTCQ_NT=4", "-DTCQ_WARPS=4", "-DTCQ_U=3", "-DTCQ_TILES=2", "-DTCQ_MINB=2",
                    "-DQ8_F16=0")
    assert tc_gemv_q8.Config(nt=1, f16=True).options(0)[-1] == "-DQ8_F16=1"


@pytest.mark.parametrize(("N", "K", "needle"), [(64, 96, "multiple of 64"), (0, 128, "N >= 1"),
                                                (64, 0, "multiple of 64")])
def test_shapes_refused_before_anything_is_allocated(N: int, K: int, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        tc_gemv_q8.check_shape(registry.get("fp8_tc_gemv"), 1, N, K)


def test_the_kind_sets_the_instruction_path() -> None:
    assert all(tc_gemv_q8.choose_config(M, N, name="fp8_tc_gemv").f16 for M in (1, 16) for N in (4096, 22016))
    assert not any(tc_gemv_q8.choose_config(M, N, name="w8a8_tc_gemv").f16 for M in (1, 16) for N in (4096, 22016))


def test_specs_declare_scheme_path_and_table() -> None:
    fp8, w8a8 = registry.get("fp8_tc_gemv"), registry.get("w8a8_tc_gemv")
    assert (fp8.scheme, fp8.facts.path, fp8.facts.dequant, fp8.min_cc) == ("fp8", "mma_sync_f16", "e4m3", 89)
    assert (w8a8.scheme, w8a8.facts.path, w8a8.facts.dequant, w8a8.min_cc) == ("w8a8", "mma_sync_s8", "none", 80)
    for spec in (fp8, w8a8):
        assert spec.facts.m_tiles == tuple((m, cols[0][1].nt * 8) for m, cols in tc_gemv_q8.TABLE)
        assert spec.m_max == tc_gemv_q8.M_MAX == tc_gemv_q8.TABLE[-1][0]
    with pytest.raises(InputError, match="no 8-bit tensor-core GEMV"):
        tc_gemv_q8.TcGemvQ8Runner(registry.get("fp8_gemv"))

"""The tensor-core W4A16 GEMV's host side on CPU: configuration table, refusals, compile options, declared facts."""

from __future__ import annotations

import math

import pytest

from kernels import registry
from kernels.tcgemv import tc_gemv, tc_gemv_q8
from models.errors import InputError

SPEC = registry.get(tc_gemv.NAME)


@pytest.mark.parametrize(("M", "nt"), [(1, 1), (8, 1), (9, 2), (16, 2)])
def test_the_table_pads_the_batch_to_whole_n_tiles(M: int, nt: int) -> None:
    for N in (0, 4096, 22016):
        cfg = tc_gemv.choose_config(M, N)
        assert cfg.nt == nt and 8 * cfg.nt >= M


def test_few_row_tiles_per_sm_take_the_few_column() -> None:
    (_, few), (_, many) = tc_gemv.TABLE[0][1]
    limit = tc_gemv.FEW_TILES_PER_SM * 132 * 16  # channels at the threshold on 132 SMs
    assert tc_gemv.choose_config(1, 4096) == few and tc_gemv.choose_config(1, limit) == few
    assert tc_gemv.choose_config(1, limit + 1) == many and tc_gemv.choose_config(1, 22016) == many
    assert tc_gemv.choose_config(1, limit + 1, sms=264) == few  # the same layer on a GPU of twice the SMs
    assert tc_gemv.choose_config(1) == many  # no N: the last column


def test_m9_16_columns_by_row_tiles_per_sm() -> None:
    (_, few), (_, third), (_, middle), (_, many) = tc_gemv.TABLE[1][1]
    assert len({few, third, middle, many}) == 4 and few.tiles == third.tiles == 1 and middle.tiles == 2
    picks = {N: tc_gemv.choose_config(16, N) for N in (4096, 4224, 4240, 6144, 6336, 6352, 8192, 10560, 10576,
                                                       12288, 22016)}
    assert picks[4096] == few and picks[4224] == few  # 1.94 and 2.0 row tiles per SM
    assert picks[4240] == third and picks[6144] == third and picks[6336] == third  # 2.008, 2.9, 3.0
    assert picks[6352] == middle and picks[8192] == middle and picks[10560] == middle  # 3.008, 3.9, 5.0
    assert picks[10576] == many and picks[12288] == many and picks[22016] == many  # 5.0076, 5.8, 10.4
    assert tc_gemv.choose_config(12, 8192, sms=66) == many  # half the SMs: twice the tiles per SM


def test_every_bins_columns_ascend_and_end_unbounded() -> None:
    for mod in (tc_gemv, tc_gemv_q8):
        for _, cols in mod.TABLE:
            tops = [t for t, _ in cols]
            assert tops == sorted(tops) and tops[-1] == math.inf and len(set(tops)) == len(tops)


@pytest.mark.parametrize("M", [0, 17, -1])
def test_batch_outside_the_kernel_is_refused(M: int) -> None:
    with pytest.raises(InputError, match=r"M in \[1, 16\]"):
        tc_gemv.choose_config(M)


def test_overrides_that_cannot_run_are_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="needs 8 \\* nt >= M"):
        tc_gemv.choose_config(12, nt=1)
    with pytest.raises(InputError, match="u, tiles and minb >= 1"):
        tc_gemv.choose_config(1, tiles=0)
    with pytest.raises(InputError, match="shared memory"):
        tc_gemv.choose_config(16, warps=32, nt=4)  # 32 warps x 16 channels x 32 rows x 4 bytes = 64 KB
    with pytest.raises(TypeError):
        tc_gemv.choose_config(1, colour=1)


def test_options_carry_every_compile_time_field() -> None:
    opts = tc_gemv.Config(nt=2, warps=4, u=3, tiles=5, wscale=True, minb=2).options(256)
    assert opts == ("-DTCG_NT=2", "-DTCG_WARPS=4", "-DTCG_U=3", "-DTCG_TILES=5", "-DTCG_WSCALE=1", "-DTCG_MINB=2",
                    "-DW4_GROUP=256")


@pytest.mark.parametrize(("N", "K", "G", "needle"), [
    (64, 256, 32, "multiple of 64"),
    (64, 200, 128, "group"),
    (0, 256, 128, "N and K must be >= 1"),
])
def test_shapes_refused_before_anything_is_allocated(N: int, K: int, G: int, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        tc_gemv.check_shape(SPEC, 1, N, K, G)


def test_declared_facts_follow_the_table() -> None:
    assert SPEC.facts.m_tiles == ((8, 8), (16, 16))
    assert SPEC.facts.bn == 16 and SPEC.facts.path == "mma_sync_f16" and not SPEC.facts.cuda_core_rows
    assert SPEC.m_max == tc_gemv.TABLE[-1][0] == tc_gemv.M_MAX


@pytest.mark.parametrize(("regs", "threads", "blocks"), [(74, 256, 3), (62, 256, 4), (51, 512, 2), (255, 1024, 1),
                                                        (32, 128, 16)])
def test_resident_blocks_by_registers_and_threads(regs: int, threads: int, blocks: int) -> None:
    """74 registers x 8 warps: 3 CTAs per SM, as Nsight Compute's 'Block Limit Registers' read on the H200."""
    from types import SimpleNamespace

    from kernels.launch import resident_blocks

    assert resident_blocks(SimpleNamespace(num_regs=regs), threads) == blocks


def test_bound_problem_counts_the_bytes_the_launch_reads_and_writes() -> None:
    import numpy as np

    from kernels import problems
    from kernels.launch import Launch, bound_problem

    params = problems.Params("w4a16", "w4", "f16", group_size=128)
    xs, ws = (np.zeros((2, 256), np.float16),), (np.zeros((16, 4, 32, 4), np.uint32), np.zeros((16, 2, 16), np.uint32))
    out = np.zeros((2, 250), np.float16)
    launch = Launch(func=None, grid=1, block=32, args=())
    p = bound_problem(problems.Inputs(params, 2, 250, 256, xs, None, ref=np.ones((2, 250))), xs, ws, out, launch)
    assert (p.M, p.N, p.K) == (2, 250, 256) and p.arrays["launch"] is launch and p.out is out
    assert set(p.arrays) == {"x0", "w0", "w1", "launch"} and p.arrays["w1"] is ws[1]
    assert p.nbytes == 2 * 256 * 2 + 16 * 4 * 32 * 4 * 4 + 16 * 2 * 16 * 4 and p.bytes == p.nbytes + 2 * 250 * 2
    assert p.ref is not None and np.isnan(p.quant_error_rel)


def test_the_gemv_runners_launch_the_bound_launch_of_their_problem() -> None:
    from types import SimpleNamespace

    from kernels.gemv import gemv, ladder
    from kernels.launch import BoundLaunchRunner
    from kernels.tcgemv import tc_gemv_q8

    calls = []
    problem = SimpleNamespace(arrays={"launch": lambda: calls.append(1)})
    for cls in (gemv.GemvRunner, ladder.LadderRunner, tc_gemv.TcGemvRunner, tc_gemv_q8.TcGemvQ8Runner):
        assert issubclass(cls, BoundLaunchRunner) and cls.launch is BoundLaunchRunner.launch
        cls.launch(None, problem)
    assert len(calls) == 4

"""bench/bench_tc_gemv.py on CPU: the plan it times (every configuration valid, both table columns, the peers) and
its refusal of bad options (exit 2, before anything touches a GPU)."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_tc_gemv as bench  # noqa: E402


@pytest.mark.parametrize(("kernel", "batches"), [("w4a16_tc_gemv", (1, 16)), ("fp8_tc_gemv", (1, 9, 16)),
                                               ("w8a8_tc_gemv", (8, 16))])
def test_plan_holds_every_column_the_variants_and_the_peers(kernel: str, batches: tuple[int, ...]) -> None:
    fam = bench.FAMILIES[kernel]
    cases = bench.plan(((22016, 4096), (4096, 4096)), batches, kernel)
    for N, K in ((22016, 4096), (4096, 4096)):
        for M in batches:
            here = [c for c in cases if c[2:] == (N, K, M)]
            configs = [c[1] for c in here if c[0] == kernel]
            columns = next(cs for top, cs in fam.module.TABLE if M <= top)
            assert all(asdict(c) in configs for _, c in columns)
            assert len(configs) == len({str(c) for c in configs}) >= 4  # no configuration timed twice
            assert all(c["nt"] * 8 >= M for c in configs)
            peers = [c[0] for c in here if c[1] is None]
            assert peers == list(fam.peers)


@pytest.mark.parametrize("argv", [["--batches", "17"], ["--batches", "0"], ["--shapes", "4096"], ["--shapes", "ax2"],
                                  ["--kernel", "fp8_tc_gemv", "--batches", "17"]])
def test_bad_options_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--batches M" in err


def test_an_unknown_kernel_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--kernel", "fp8_gemv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "w4a16_tc_gemv, fp8_tc_gemv, w8a8_tc_gemv" in err

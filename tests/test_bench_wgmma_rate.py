"""bench/bench_wgmma_rate.py on CPU: its instances fit the registers it launches them with, bad arguments exit 2."""

from __future__ import annotations

from bench import bench_wgmma_rate as b


def test_every_instance_keeps_its_accumulators_under_the_register_file() -> None:
    cs = b.cases()
    assert (16, 1, 4) in cs and (128, 0, 2) in cs and (128, 1, 4) not in cs
    assert all(ch * n // 2 <= 128 for n, _, ch in cs)
    assert b.expression(64, 1, 2) == "wgmma_rate<64, 1, 2>"


def test_too_few_iterations_are_refused_in_one_line(capsys) -> None:
    assert b.main(["--iters", "8"]) == 2
    err = capsys.readouterr().err
    assert "--iters takes an integer >= 64, got 8" in err and len(err.strip().splitlines()) == 1

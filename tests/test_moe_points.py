"""`workbench profile --moe` on CPU (issue 33 item 5): planning of the expert layers, the MoE columns of each row,
resume keyed by routing and seed, dense rows and older files beside them, and bad input (one line, exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.moe import draw
from tests.fakes_profiler import FakeNvmlDevice, FakeRunner, FakeTimer
from tests.test_profiler_cpu import CFG, ENV, SHAPES
from workbench.interfaces.cli import main
from workbench.measure import moe_points
from workbench.measure.nvml import NvmlSampler
from workbench.measure.profiler import plan, run_sweep
from workbench.storage import store

BATCHES = [1, 8, 64]


class Factory:
    """One FakeRunner per (kernel, setup), as the sweep asks for them (dense kernels: their own)."""

    def __init__(self) -> None:
        self.made: list[tuple[str, object]] = []
        self.runner = FakeRunner()

    def __call__(self, name, group_size=None, *, setup=None):
        self.made.append((name, setup))
        return self.runner


def sweep(points, out, factory):
    return run_sweep(points, out, ENV, cfg=CFG, timer=FakeTimer(factory.runner), runner_factory=factory,
                     sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=lambda m: None)


def moe_plan(models=("olmoe-1b-7b",), routing="uniform", seed=0, schemes=("bf16",), batches=BATCHES,
             kernels=("grouped_bf16_tc",)):
    """Points of the plan on an sm_90 GPU; kernels=() takes every kernel of the schemes (bf16: two)."""
    specs = moe_points.select(list(schemes), list(kernels))
    return moe_points.plan(specs, moe_points.setups(list(models), routing, seed), batches, 90)


def small(points):
    """The same points on tiny shapes (the NumPy fake multiplies N x K weights for real)."""
    from dataclasses import replace

    return [replace(p, shape=replace(p.shape, N=32, K=16)) for p in points]


def test_plan_covers_each_models_expert_layers_per_kernel_and_batch():
    points = moe_plan(("mixtral-8x7b", "qwen3-30b-a3b"), schemes=("bf16", "w4a16"), kernels=())
    assert len(points) == 3 * 2 * 2 * len(BATCHES)
    layers = {p.shape.layer for p in points}
    assert layers == {"mixtral-8x7b/expert_gate_up", "mixtral-8x7b/expert_down", "qwen3-30b-a3b/expert_gate_up",
                      "qwen3-30b-a3b/expert_down"}
    assert {p.spec.name for p in points} == {"grouped_bf16_tc", "grouped_bf16_wg", "grouped_w4a16_tc"}
    q = next(p for p in points if p.shape.layer == "qwen3-30b-a3b/expert_down")
    assert (q.setup.experts, q.setup.top_k, q.setup.gather, q.shape.N, q.shape.K) == (128, 8, False, 2048, 768)
    g = next(p for p in points if p.shape.layer == "qwen3-30b-a3b/expert_gate_up")
    assert g.setup.gather and (g.shape.N, g.shape.K) == (1536, 2048)
    assert [p.spec.name for p in points][:len(points) // 3] == ["grouped_bf16_tc"] * (len(points) // 3)


def test_default_schemes_include_fp8_where_the_gpu_runs_it():
    specs = moe_points.select([], [])
    assert [s.name for s in specs] == ["grouped_bf16_tc", "grouped_bf16_wg", "grouped_w4a16_tc", "grouped_fp8_tc"]
    layers = moe_points.setups(["olmoe-1b-7b"], "uniform", 0)
    on_h100 = moe_points.plan(specs, layers, [1, 8], 90)
    assert {p.spec.name for p in on_h100} == {s.name for s in specs} and len(on_h100) == 4 * 2 * 2
    on_a100 = moe_points.plan(specs, layers, [1, 8], 80)  # the e4m3 conversion needs sm_89, wgmma sm_90
    assert {p.spec.name for p in on_a100} == {"grouped_bf16_tc", "grouped_w4a16_tc"}
    on_l40s = moe_points.plan(specs, layers, [1, 8], 89)
    assert {p.spec.name for p in on_l40s} == {"grouped_bf16_tc", "grouped_w4a16_tc", "grouped_fp8_tc"}
    on_b200 = moe_points.plan(specs, layers, [1, 8], 100)  # sm_90a code does not run on sm_100
    assert "grouped_bf16_wg" not in {p.spec.name for p in on_b200}
    assert "sm_89" in moe_points.spec("grouped_fp8_tc").unsupported(80)


def test_rows_carry_routing_seed_and_the_drawn_routing(tmp_path):
    out = tmp_path / "moe.parquet"
    factory = Factory()
    points = small(moe_plan(seed=7))
    res = sweep(points, out, factory)
    assert res.measured == len(points) == 2 * len(BATCHES)
    assert len({id(s) for _, s in factory.made}) == 2  # one runner per (kernel, layer setup)
    df = store.load_measurements(out)
    r = df[(df["layer"] == "olmoe-1b-7b/expert_gate_up") & (df["M"] == 64)].iloc[0]
    counts = np.bincount(draw(64, 64, 8, "uniform", 7).ravel(), minlength=64)
    assert (r["experts"], r["top_k"], r["routing"], r["routing_seed"]) == (64, 8, "uniform", 7)
    assert r["touched_experts"] == np.count_nonzero(counts) and r["busiest_rows"] == counts.max()
    assert r["flops"] == 2 * 64 * 8 * 32 * 16
    one = df[df["M"] == 1].iloc[0]
    assert one["touched_experts"] == 8 and one["busiest_rows"] == 1


def test_resume_is_per_routing_and_seed_and_dense_rows_sit_beside(tmp_path):
    out = tmp_path / "moe.parquet"
    points = small(moe_plan(seed=0))
    sweep(points, out, Factory())
    res = sweep(points, out, Factory())
    assert res.measured == 0 and res.skipped_done == len(points)
    res = sweep(small(moe_plan(seed=1)), out, Factory())  # another seed: other points
    assert res.measured == len(points)
    res = sweep(small(moe_plan(routing="zipf:1.0")), out, Factory())
    assert res.measured == len(points)
    from tests.fakes_profiler import FAKE_SPEC

    dense = plan([FAKE_SPEC], SHAPES[:1], [1, 4], 90)
    assert sweep(dense, out, Factory()).measured == 2
    df = store.load_measurements(out)
    assert len(df) == 3 * len(points) + 2
    d = df[df["kernel"] == FAKE_SPEC.name]
    assert (d["experts"] == 1).all() and (d["routing"] == "").all() and (d["busiest_rows"] == d["M"]).all()
    assert set(df["routing"]) == {"", "uniform", "zipf:1"}


def test_a_file_written_before_the_moe_columns_reads_with_dense_defaults(tmp_path):
    from tests.fakes_profiler import FAKE_SPEC

    out = tmp_path / "old.parquet"
    sweep(plan([FAKE_SPEC], SHAPES, [1, 2], 90), out, Factory())
    old = pd.read_parquet(out).drop(columns=list(moe_points_columns()))
    old.to_parquet(out)
    df = store.load_measurements(out)
    assert (df["experts"] == 1).all() and (df["top_k"] == 1).all() and (df["routing"] == "").all()
    assert (df["busiest_rows"] == df["M"]).all() and (df["touched_experts"] == 1).all()


def moe_points_columns():
    from workbench.storage.schema import ADDED_COLUMNS

    return ADDED_COLUMNS


def test_device_memory_counts_every_expert():
    p = next(p for p in moe_plan(("deepseek-v3",)) if p.shape.layer.endswith("gate_up"))
    assert moe_points.device_bytes(p, 50 << 20) > 256 * 4096 * 7168 * 2
    with pytest.raises(InputError, match="GB free"):
        moe_points.check_memory([p], 8 << 30, 50 << 20)


@pytest.mark.parametrize("args, message", [
    (["--moe", "no-such-model"], "unknown model"),
    (["--moe", "llama-2-7b"], "no MoE expert layers"),
    (["--routing", "zipf:1"], "apply to --moe"),
    (["--moe", "olmoe-1b-7b", "--routing-seed", "-1"], "--routing-seed"),
    (["--moe", "olmoe-1b-7b", "--routing", "zipf:x"], "malformed routing"),
    (["--moe", "olmoe-1b-7b", "--routing", "HIST"], "has 5 counts, but the layer has 64 experts"),
    (["--moe", "olmoe-1b-7b", "--routing", "NEG"], "counts must be finite numbers >= 0"),
    (["--moe", "olmoe-1b-7b", "--scheme", "w8a16"], "--moe measures schemes bf16, w4a16, fp8"),
    (["--moe", "olmoe-1b-7b", "--kernel", "wg_bf16"], "unknown grouped kernel"),
    (["--moe", "olmoe-1b-7b", "--model", "llama-2-7b"], "leave out --model"),
    (["--moe", "olmoe-1b-7b", "--out", "x.csv"], "ending in .parquet"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "HIST").write_text("1,2,3,4,5")
    (tmp_path / "NEG").write_text(json.dumps({"counts": [1, -3] + [1] * 62}))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["profile", *args, "--data-dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_valid_moe_sweep_without_a_gpu_says_so_and_writes_nothing(capsys, tmp_path, monkeypatch):
    from tests.test_profiler_cpu import _has_gpu

    if _has_gpu():
        pytest.skip("this machine has a GPU")
    monkeypatch.chdir(tmp_path)
    code = main(["profile", "--moe", "mixtral-8x7b,olmoe-1b-7b", "--routing", "zipf:0.5", "--routing-seed", "3",
                 "-s", "bf16", "-M", "1,64", "--out", str(tmp_path / "m" / "moe.parquet")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []

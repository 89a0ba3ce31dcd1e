"""Several GPUs of one host, on CPU: fake GPUs, real worker processes (spawn), the real single-GPU sweep inside."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from models.errors import InputError
from tests.fakes_multigpu import FAKE_W4, PLAN_SPECS, SHAPES, FakeBackend, fake_gpus, fake_points
from workbench.interfaces.cli import main
from workbench.measure.multigpu import (
    Gpu,
    key_of,
    profile_gpus,
    select_gpus,
    sibling_outs,
    split_points,
    worker_out,
)
from workbench.measure.profiler import Shape, plan
from workbench.measure.timing import TimingConfig
from workbench.storage import store

CFG = TimingConfig(budget_s=0.005, sample_s=1e-4)


def run(tmp_path: Path, gpus: list[Gpu], split: bool, backend: FakeBackend, **kw):
    out = tmp_path / "m" / "sweep.parquet"
    return profile_gpus(lambda g: fake_points(), gpus=gpus, split=split, out_for=lambda g: out, cfg=CFG,
                        backend=backend, calibration_dir=tmp_path / "cal", log=lambda m: None, **kw), out


def rows(out: Path) -> pd.DataFrame:
    return store.load_measurements(sibling_outs(out))


def keys(df: pd.DataFrame) -> Counter:
    return Counter(zip(df["kernel"], df["layer"], df["M"], df["N"], df["K"], strict=True))


def plan_keys() -> Counter:
    return Counter((p.spec.name, p.shape.layer, p.M, p.shape.N, p.shape.K) for p in fake_points())


def test_select_gpus_by_all_index_and_uuid():
    gpus = fake_gpus(4)
    assert select_gpus("all", gpus) == gpus
    assert select_gpus("0,2", gpus) == [gpus[0], gpus[2]]
    assert select_gpus(gpus[3].uuid[:12], gpus) == [gpus[3]]
    with pytest.raises(InputError, match="no GPU '7'"):
        select_gpus("0,7", gpus)
    with pytest.raises(InputError, match="named twice"):
        select_gpus("1,1", gpus)


def test_worker_files_are_tagged_by_uuid_and_found_again(tmp_path):
    out = tmp_path / "sweep-cold.parquet"
    gpus = fake_gpus(2)
    paths = [worker_out(out, g.uuid) for g in gpus]
    assert [p.name for p in paths] == ["sweep-cold.gpu-00000000.parquet", "sweep-cold.gpu-00000001.parquet"]
    paths[0].write_bytes(b"")
    store.journal_path(paths[1]).write_text("")
    (tmp_path / "sweep-cold.parquet").write_bytes(b"")  # the plain sweep's file is not a sibling
    (tmp_path / "sweep-hot.gpu-00000000.parquet").write_bytes(b"")
    assert sibling_outs(out) == paths


def test_split_is_deterministic_and_deals_each_unfinished_point_once():
    points = fake_points()
    shares = split_points(points, 4, set(), "cold")
    assert shares == split_points(points, 4, set(), "cold")
    assert sorted(len(s) for s in shares) == [5, 5, 5, 5]
    assert Counter(key_of(p, "cold") for s in shares for p in s) == Counter(key_of(p, "cold") for p in points)
    done = {key_of(p, "cold") for p in points[:7]}
    again = split_points(points, 4, done, "cold")
    assert [key_of(p, "cold") for s in again for p in s if key_of(p, "cold") in done] == []
    assert sum(len(s) for s in again) == 13


def test_split_over_four_fake_gpus_finishes_every_point_exactly_once(tmp_path):
    res, out = run(tmp_path, fake_gpus(4), True, FakeBackend())
    assert all(r.ok for r in res.reports), [r.error for r in res.reports]
    df = rows(out)
    assert keys(df) == plan_keys()  # every point, once
    assert len(sibling_outs(out)) == 4
    for r in res.reports:  # each worker wrote only its own GPU's rows, into its own file
        mine = store.load_measurements(r.out)
        assert set(mine["gpu_uuid"]) == {r.gpu.uuid} and len(mine) == r.measured == 5
    assert set(df["host"]) == {"host-0", "host-1"}
    cal = store.load_calibrations(tmp_path / "cal")  # each GPU calibrated first, one file per UUID
    assert len(list((tmp_path / "cal").glob("*.json"))) == 4 and cal


def test_a_killed_worker_loses_no_other_point_and_the_rerun_finishes_once(tmp_path):
    gpus = fake_gpus(4)
    backend = FakeBackend(die_on=gpus[1].uuid, die_after=2, marker=tmp_path / "died")
    res, out = run(tmp_path, gpus, True, backend)
    dead = res.reports[1]
    assert not dead.ok and dead.exitcode == 9 and "killed" in dead.error
    assert [r.ok for r in res.reports] == [True, False, True, True]
    first = rows(out)
    assert len(first) == 5 + 2 + 5 + 5 and set(keys(first).values()) == {1}
    assert (first["gpu_uuid"] == gpus[1].uuid).sum() == 2  # the dead worker's journal kept its two points

    res2, _ = run(tmp_path, gpus, True, FakeBackend())
    assert res2.already_done == 17 and sum(r.planned for r in res2.reports) == 3  # only the unfinished are dealt
    assert all(r.ok for r in res2.reports)
    assert keys(rows(out)) == plan_keys()


def test_ctrl_c_in_one_worker_keeps_its_finished_points_and_the_others_finish(tmp_path):
    gpus = fake_gpus(2)
    victim = worker_out(tmp_path / "m" / "sweep.parquet", gpus[1].uuid)
    paused = tmp_path / "paused"  # written by the victim when it has 2 points and waits at its third

    def interrupt_when_it_waits() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not paused.exists():
            time.sleep(0.01)
        child = next(p for p in mp.active_children() if p.name.endswith(gpus[1].tag))
        os.kill(child.pid, signal.SIGINT)

    threading.Thread(target=interrupt_when_it_waits, daemon=True).start()
    res, out = run(tmp_path, gpus, True, FakeBackend(pause_on=gpus[1].uuid, pause_after=2, marker=paused))
    hit, other = res.reports[1], res.reports[0]
    assert hit.exitcode == 130 and hit.error == "interrupted" and other.ok and other.measured == 10
    kept = store.load_measurements(victim)  # folded from the journal by the interrupted sweep itself
    assert len(kept) == 2 and not store.journal_path(victim).exists()
    res2, _ = run(tmp_path, gpus, True, FakeBackend())
    assert res2.already_done == 10 + 2 and keys(rows(out)) == plan_keys()


def test_whole_plan_per_gpu_and_resume_skips_each_gpus_own_points(tmp_path):
    gpus = fake_gpus(2)
    res, out = run(tmp_path, gpus, False, FakeBackend())
    assert [r.measured for r in res.reports] == [20, 20]
    df = rows(out)
    for g in gpus:
        assert keys(df[df["gpu_uuid"] == g.uuid]) == plan_keys()
    res2, _ = run(tmp_path, gpus, False, FakeBackend())
    assert [(r.measured, r.skipped_done) for r in res2.reports] == [(0, 20), (0, 20)]


def test_split_refuses_gpus_of_different_kinds(tmp_path):
    gpus = [Gpu(0, "GPU-a", "NVIDIA H200", 90), Gpu(1, "GPU-b", "NVIDIA A100-SXM4-80GB", 80)]
    with pytest.raises(InputError, match="identical GPUs"):
        run(tmp_path, gpus, True, FakeBackend())


def test_cli_branch_prints_a_table_and_bad_options_exit_2(tmp_path, capsys):
    from workbench.interfaces.cli_scale import profile_many

    out = tmp_path / "cli" / "sweep.parquet"
    profile_many(list(PLAN_SPECS), SHAPES, [1, 2], CFG, gpus="0,1", split=True, ray=None, out=out, fresh=False,
                 calibration_dir=tmp_path / "cal", default_out=lambda g, hot: out, data_dir=tmp_path,
                 backend=FakeBackend(), available=fake_gpus(3))
    text = capsys.readouterr().out
    assert "measured 8 points" in text and "gpu-00000001" in text
    assert len(store.load_measurements(sibling_outs(out))) == 8
    assert main(["profile", "--split", "-k", "cublas_bf16", "-m", "1"]) == 2
    assert "give it with --gpus or --ray" in capsys.readouterr().err
    assert main(["profile", "--gpus", "all", "--ray", "local", "-k", "cublas_bf16", "-m", "1"]) == 2


def test_split_resume_knows_the_group_size_a_sweep_records(tmp_path):
    points = plan([FAKE_W4], [Shape("", 32, 128)], [1, 2, 4, 8], 90)
    out = tmp_path / "g" / "sweep.parquet"

    def go():
        return profile_gpus(lambda g: points, gpus=fake_gpus(2), split=True, out_for=lambda g: out, cfg=CFG,
                            backend=FakeBackend(), calibration_dir=None, group_size=64, log=lambda m: None)

    first = go()
    assert sum(r.measured for r in first.reports) == 4 and set(rows(out)["group_size"]) == {64}
    again = go()
    assert again.already_done == 4 and sum(r.planned for r in again.reports) == 0


def test_worker_calibrates_in_a_child_process_and_reports_its_failure(tmp_path, monkeypatch):
    """calibrate_apart runs `workbench calibrate --out DIR` in a child (in-process calibration slowed the points
    measured next on the H200), forwards its output, and turns a failed child into one line naming its last words."""
    import subprocess

    from workbench.measure import gpu_worker

    calls = []

    def fake_run(cmd, **kw):
        calls.append((cmd, kw))
        rc = 0 if len(calls) == 1 else 3
        return subprocess.CompletedProcess(cmd, rc, stdout="read curve\nwrote cal.json\n",
                                           stderr="" if rc == 0 else "Traceback\nInputError: no GPU\n")

    monkeypatch.setattr(gpu_worker.subprocess, "run", fake_run)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    logged: list[str] = []
    gpu_worker.calibrate_apart(tmp_path / "cal", logged.append)
    cmd, kw = calls[0]
    assert cmd[1:] == ["-m", "workbench", "calibrate", "--out", str(tmp_path / "cal")]
    assert kw["env"]["CUDA_VISIBLE_DEVICES"] == "2"  # the child sees the worker's GPU only
    assert logged == ["read curve", "wrote cal.json"]
    with pytest.raises(RuntimeError, match=r"exit 3\): InputError: no GPU$"):
        gpu_worker.calibrate_apart(tmp_path / "cal", logged.append)

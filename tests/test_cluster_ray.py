"""`profile --ray` on CPU: a local Ray instance declaring 4 fake GPUs of one kind, the fake backend in each task."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from models.errors import InputError
from tests.fakes_multigpu import FakeBackend, fake_points, fake_uuid
from workbench.interfaces.cli import main
from workbench.measure.cluster import check_address, gpu_kinds, kind_matches, profile_ray, require_ray
from workbench.measure.multigpu import sibling_outs
from workbench.measure.timing import TimingConfig
from workbench.storage import store

CFG = TimingConfig(budget_s=0.005, sample_s=1e-4)


def test_gpu_kinds_count_alive_gpu_nodes_by_accelerator_type():
    nodes = [
        {"Alive": True, "Resources": {"CPU": 64, "GPU": 8, "accelerator_type:H100": 1}},
        {"Alive": True, "Resources": {"CPU": 64, "GPU": 8, "accelerator_type:H100": 1}},
        {"Alive": True, "Resources": {"CPU": 32, "GPU": 4, "accelerator_type:A100": 1}},
        {"Alive": False, "Resources": {"CPU": 32, "GPU": 4, "accelerator_type:A100": 1}},
        {"Alive": True, "Resources": {"CPU": 16}},
        {"Alive": True, "Resources": {"CPU": 16, "GPU": 1}},
    ]
    assert gpu_kinds(nodes) == {"H100": 16, "A100": 4, "": 1}
    assert kind_matches("H200", "NVIDIA H200") and kind_matches("A100", "NVIDIA A100-SXM4-80GB")
    assert not kind_matches("H100", "NVIDIA H200") and kind_matches("", "anything")


def test_without_ray_the_option_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InputError, match=r"\[cluster\]"):
        require_ray()


def test_a_malformed_or_unreachable_address_is_refused_before_ray_init():
    """ray.init retries an unreachable head for minutes, logging every few seconds; the address is checked first."""
    import socket

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    for address, says in (("bogus:99999", "port 1..65535"), ("headnode", "HOST:PORT"), (":6379", "HOST:PORT"),
                          ("host:" + "9" * 5000, "port 1..65535"), (f"127.0.0.1:{closed}", "cannot reach"),
                          (f"ray://127.0.0.1:{closed}", "cannot reach"), ("no.such.host.invalid:6379", "cannot reach")):
        with pytest.raises(InputError, match=says):
            check_address(address, timeout_s=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        for address in ("local", "auto", f"127.0.0.1:{s.getsockname()[1]}", f"ray://localhost:{s.getsockname()[1]}"):
            check_address(address, timeout_s=2)


def test_empty_gpus_or_ray_is_refused_not_read_as_one_local_gpu(capsys, tmp_path):
    for option in ("--gpus", "--ray"):
        assert main(["profile", option, "", "--data-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err == f"error: {option} is empty; give a value or leave the option out\n", err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=4, num_gpus=4, resources={"accelerator_type:FAKE": 4}, include_dashboard=False,
             log_to_driver=False)
    yield ray
    ray.shutdown()


def run(tmp_path, split, backend, **kw):
    out = tmp_path / "ray" / "sweep-cold.parquet"
    logs: list[str] = []
    res = profile_ray(fake_points(), address="local", split=split, out=out, cfg=CFG, backend=backend,
                      calibration_dir=tmp_path / "cal", log=logs.append, **kw)
    return res, out, logs


def plan_keys() -> Counter:
    return Counter((p.spec.name, p.shape.layer, p.M, p.shape.N, p.shape.K) for p in fake_points())


def stored(out) -> Counter:
    df = store.load_measurements(sibling_outs(out))
    return Counter(zip(df["kernel"], df["layer"], df["M"], df["N"], df["K"], strict=True))


def test_split_over_four_ray_gpus_streams_every_point_once(ray_local, tmp_path):
    res, out, _ = run(tmp_path, True, FakeBackend())
    assert res.kinds == {"FAKE": 4} and len(res.shares) == 4 and not res.unfinished
    assert sum(res.rows_by_uuid.values()) == 20 and stored(out) == plan_keys()
    assert set(res.files) == {fake_uuid(i) for i in range(4)}
    for uuid, path in res.files.items():  # one file per GPU, written by the driver only
        assert set(store.load_measurements(path)["gpu_uuid"]) == {uuid}
    assert len(list((tmp_path / "cal").glob("*.json"))) == 4  # each GPU calibrated first, the docs sent back


def test_a_lost_worker_is_resubmitted_and_every_point_lands_once(ray_local, tmp_path):
    backend = FakeBackend(die_on=fake_uuid(1), die_after=2, marker=tmp_path / "died")
    res, out, logs = run(tmp_path, True, backend)
    assert (tmp_path / "died").exists()
    lost = [s for s in res.shares if s.lost]
    assert len(lost) == 1 and "WorkerCrashedError" in lost[0].error and res.resubmitted == 1
    assert not res.unfinished and stored(out) == plan_keys()
    assert any("resubmitting" in line for line in logs)


def test_whole_plan_per_gpu_then_resume_measures_nothing_again(ray_local, tmp_path):
    res, out, _ = run(tmp_path, False, FakeBackend())
    assert sorted(res.rows_by_uuid.values()) == [20, 20, 20, 20]
    df = store.load_measurements(sibling_outs(out))
    assert len(df) == 80 and df.groupby("gpu_uuid").size().tolist() == [20] * 4
    res2, _, _ = run(tmp_path, False, FakeBackend())
    assert res2.rows_by_uuid == {} and not res2.unfinished
    assert len(store.load_measurements(sibling_outs(out))) == 80


def test_cli_branch_for_ray_prints_the_tasks_and_the_files(ray_local, tmp_path, capsys):
    from tests.fakes_multigpu import BATCHES, PLAN_SPECS, SHAPES
    from workbench.interfaces.cli_scale import profile_many

    out = tmp_path / "r" / "sweep.parquet"
    profile_many(list(PLAN_SPECS), SHAPES, BATCHES, CFG, gpus=None, split=True, ray="local", out=out,
                 fresh=False, calibration_dir=tmp_path / "cal", default_out=lambda g, hot: out, data_dir=tmp_path,
                 backend=FakeBackend())
    text = capsys.readouterr().out
    assert "4 x FAKE" in text and "received 20 points" in text and fake_uuid(3) in text
    assert stored(out) == plan_keys()

"""workbench.measure.stale and `workbench stale`: rows that measure changed kernel code (CPU)."""

import dataclasses
import shutil
import subprocess

import pytest

from kernels import fingerprint
from models.errors import InputError
from tests.compare_fixtures import frame, point
from tests.fakes_profiler import FAKE_SPEC, FakeRunner
from tests.test_profiler_cpu import ENV, SHAPES, sweep
from workbench.interfaces.cli import main
from workbench.measure.environment import Environment
from workbench.measure.profiler import plan
from workbench.measure.stale import code_status, row_status, stale_points, summary
from workbench.storage import store

NOW = {"w4a16_gemv": "a" * 16, "wg_w8a16": "b" * 16}


def now(kernel):
    return NOW.get(kernel, "")


def rows(*specs):
    """Measurement rows: (kernel, recorded fingerprint, git_commit, how many)."""
    out = []
    for kernel, recorded, commit, n in specs:
        out += [point(kernel, "w4a16", M, 1e-5, kernel_fingerprint=recorded, git_commit=commit)
                for M in range(1, n + 1)]
    return frame(out)


def test_a_recorded_fingerprint_is_compared_with_the_installed_code():
    df = rows(("w4a16_gemv", "a" * 16, "x", 3), ("wg_w8a16", "c" * 16, "x", 2), ("gone_kernel", "d" * 16, "x", 1))
    table = code_status(df, current=now)
    assert table[["kernel", "points", "status"]].values.tolist() == [
        ["wg_w8a16", 2, "changed"], ["gone_kernel", 1, "unknown"], ["w4a16_gemv", 3, "current"]]
    assert table.loc[1, "basis"] == "not a kernel this workbench declares"
    assert row_status(df, current=now).tolist() == ["current"] * 3 + ["changed"] * 2 + ["unknown"]
    assert summary(table) == "6 rows: 2 changed, 1 unknown, 3 current; changed code: wg_w8a16"


def test_rows_without_a_fingerprint_are_unknown_where_their_commit_cannot_be_read(tmp_path):
    df = rows(("w4a16_gemv", "", "", 1), ("w4a16_gemv", "", "1234567-dirty", 1), ("w4a16_gemv", "", "abc", 1))
    table = code_status(df, repo=tmp_path, current=now)  # no .git there
    assert set(table["status"]) == {"unknown"}
    assert sorted(table["basis"].str.split(";").str[-1].str.strip().str[:20]) == [
        "measured from uncomm", "no git repository at", "no kernel_fingerprin"]


def test_rows_without_a_fingerprint_are_checked_against_the_code_at_their_commit():
    root = fingerprint.ROOT
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("needs the workbench's git repository")
    clean = subprocess.run(["git", "status", "--porcelain", "--", "kernels", "models"], cwd=root,
                           capture_output=True, text=True).stdout.strip() == ""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    df = rows(("w4a16_gemv", "", head, 2), ("wg_w8a16", "", "f" * 40, 1))
    table = code_status(df).set_index("kernel")
    if clean:
        assert table.loc["w4a16_gemv", "status"] == "current"
    assert table.loc["w4a16_gemv", "basis"] == f"code at {head[:7]}"
    assert table.loc["wg_w8a16", "status"] == "unknown" and "is not in the repository" in table.loc["wg_w8a16",
                                                                                                     "basis"]


def test_the_profiler_writes_each_rows_fingerprint(tmp_path):
    declared = dataclasses.replace(FAKE_SPEC, name="fp32_gemv")  # a declared kernel's name on the fake runner
    out = tmp_path / "sweep.parquet"
    sweep(plan([FAKE_SPEC, declared], SHAPES[:1], [1], 90), out, FakeRunner())
    df = store.load_measurements(out).set_index("kernel")
    assert df.loc["fp32_gemv", "kernel_fingerprint"] == fingerprint.current("fp32_gemv") != ""
    assert df.loc[FAKE_SPEC.name, "kernel_fingerprint"] == ""  # not a kernel this workbench declares


def test_files_written_before_the_column_read_with_it_empty(tmp_path):
    path = tmp_path / "old.parquet"
    rows(("w4a16_gemv", "", "abc", 2)).drop(columns="kernel_fingerprint").to_parquet(path)
    assert store.read_measurement_file(path)["kernel_fingerprint"].tolist() == ["", ""]


def _data(tmp_path):
    current = fingerprint.current("w4a16_gemv")
    folder = tmp_path / "measurements" / "h200-sxm"
    folder.mkdir(parents=True)
    store.write_points(folder / "sweep.parquet", rows(("w4a16_gemv", current, "x", 2), ("wg_w8a16", "0" * 16, "x", 3)))
    return tmp_path


def test_cli_lists_the_changed_rows_and_checks(tmp_path, capsys):
    data = str(_data(tmp_path))
    assert main(["stale", "--data-dir", data]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and "wg_w8a16" in out[1] and "changed" in out[1] and "measurements/h200-sxm" in out[1]
    assert out[-2] == "5 rows: 3 changed, 2 current; changed code: wg_w8a16"
    assert out[-1] == f"on h200-sxm: workbench profile --stale --out {data}/measurements/h200-sxm/sweep.parquet"
    assert main(["stale", "--data-dir", data, "--all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 5
    assert main(["stale", "--data-dir", data, "--check"]) == 1
    capsys.readouterr()
    assert main(["stale", "--data-dir", data, "--check", "-k", "w4a16_gemv"]) == 0
    assert capsys.readouterr().out == "2 rows: 2 current\n"


@pytest.mark.parametrize("args, message", [
    (["--gpu", "a100"], "error: --gpu a100: no rows of it in the data; the data holds h200-sxm"),
    (["-k", "w4a16_gemv,"], "error: --kernel 'w4a16_gemv,' has an empty item; give values, or a comma list"),
    (["-k", "nope"], "error: --kernel nope: no rows of it in the data; the data holds w4a16_gemv, wg_w8a16"),
])
def test_cli_bad_filters_are_one_line(tmp_path, capsys, args, message):
    assert main(["stale", "--data-dir", str(_data(tmp_path)), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_cli_without_measurements_is_one_line(tmp_path, capsys):
    assert main(["stale", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: no measurements under {tmp_path}\n"


H200 = Environment("NVIDIA H200", "h200-sxm", "GPU-0000", "9.0", 132, 1 << 26, 1 << 37, "580", "13.0", "14.2", "",
                   "abc")


def _file_rows():
    """An output file's rows: wg_w8a16 changed on the H200 (cold, hot, an MoE row) and on an H100, w4a16_gemv
    current."""
    same, old = fingerprint.current("w4a16_gemv"), "0" * 16
    rows = [point("w4a16_gemv", "w4a16", M, 1e-5, kernel_fingerprint=same) for M in (1, 2)]
    rows += [point("wg_w8a16", "w8a16", M, 1e-5, kernel_fingerprint=old, layer=layer) for M in (16, 32)
             for layer in ("", "llama-2-7b/o_proj")]
    rows += [point("wg_w8a16", "w8a16", 16, 1e-5, kernel_fingerprint=old, mode="hot")]
    rows += [point("wg_w8a16", "w8a16", 16, 1e-5, kernel_fingerprint=old, gpu="h100-sxm")]
    rows += [point("grouped_bf16_tc", "bf16", 16, 1e-5, kernel_fingerprint=old, experts=8, top_k=2,
                   routing="uniform", routing_seed=seed, layer="mixtral-8x7b/expert_down", N=4096, K=K)
             for seed, K in ((0, 14336), (3, 14336), (0, 4096))]  # the last: not the layer's shape now
    return frame(rows).fillna({"experts": 1, "top_k": 1, "routing": "", "routing_seed": 0})


def test_stale_points_are_the_changed_dense_points_of_this_gpu_kind_and_mode():
    points, group, notes = stale_points(_file_rows(), H200, "cold")
    assert [(p.spec.name, p.shape.layer, p.M) for p in points] == [
        ("grouped_bf16_tc", "mixtral-8x7b/expert_down", 16), ("grouped_bf16_tc", "mixtral-8x7b/expert_down", 16),
        ("wg_w8a16", "", 16), ("wg_w8a16", "", 32), ("wg_w8a16", "llama-2-7b/o_proj", 16),
        ("wg_w8a16", "llama-2-7b/o_proj", 32)]
    moe = [p.setup for p in points[:2]]  # the expert layer rebuilt: its model, routing and seed
    assert [(s.model, s.experts, s.top_k, s.routing.label, s.routing_seed, s.gather) for s in moe] == [
        ("mixtral-8x7b", 8, 2, "uniform", 0, False), ("mixtral-8x7b", 8, 2, "uniform", 3, False)]
    assert all(p.setup is None for p in points[2:]) and group is None  # no w4a16 point among them
    assert notes == [
        "1 changed rows of h100-sxm left as they are: measure them on that GPU",
        "1 changed rows measured hot left: run again with --hot",
        "grouped_bf16_tc mixtral-8x7b/expert_down M=16 left: mixtral-8x7b has no 4096x4096 expert layer "
        "mixtral-8x7b/expert_down now"]
    assert stale_points(_file_rows(), H200, "cold", {"w4a16_gemv"})[0] == []
    hot = stale_points(_file_rows(), H200, "hot")[0]
    assert [(p.spec.name, p.M) for p in hot] == [("wg_w8a16", 16)]


def test_stale_points_leave_what_this_gpu_cannot_run_and_refuse_mixed_group_sizes():
    a100 = dataclasses.replace(H200, gpu_name="NVIDIA A100", gpu_key="h200-sxm", compute_capability="8.0")
    points, _, notes = stale_points(_file_rows(), a100, "cold")
    assert [p.spec.name for p in points] == ["grouped_bf16_tc"] * 2  # sm_80 code: an A100 runs it
    assert notes[-4:] == [f"wg_w8a16 {where} M={M} left: wg_w8a16 needs sm_90 only (wgmma, TMA and thread-block "
                          "clusters: sm_90a code); this GPU is sm_80" for where in ("4096x4096", "llama-2-7b/o_proj")
                          for M in (16, 32)]
    old = "0" * 16
    rows = frame([point("w4a16_tc_gemv", "w4a16", 1, 1e-5, kernel_fingerprint=old, group_size=g) for g in (64, 128)])
    with pytest.raises(InputError, match=r"group sizes \[64, 128\]; give --kernel"):
        stale_points(rows, H200, "cold")
    rows = frame([point("w4a16_tc_gemv", "w4a16", 1, 1e-5, kernel_fingerprint=old, group_size=64)])
    assert stale_points(rows, H200, "cold")[1] == 64


@pytest.mark.parametrize("args, message", [
    (["--stale"], "error: --stale needs --out FILE, a measurement file that exists (got None)"),
    (["--stale", "--out", "missing.parquet"], "error: --stale needs --out FILE, a measurement file that exists"),
    (["--stale", "--fresh", "--out", "x.parquet"], "error: --stale takes its points from --out and measures them "
     "again on one GPU; leave out --fresh"),
    (["--stale", "--shape", "4096x4096", "-M", "1", "-s", "fp8", "--out", "x.parquet"], "error: --stale takes its "
     "points from --out and measures them again on one GPU; leave out --shape, --batch, --scheme"),
    (["--stale", "-k", "nope", "--out", "{file}"], "error: --kernel nope: not a kernel of this workbench"),
])
def test_profile_stale_bad_arguments_are_one_line_before_a_gpu_is_looked_for(args, message, capsys, tmp_path):
    file = tmp_path / "f.parquet"
    store.write_points(file, _file_rows())
    assert main(["profile", *[a.format(file=file) for a in args]]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_the_stale_points_measured_again_replace_their_rows(tmp_path):
    declared = dataclasses.replace(FAKE_SPEC, name="fp32_gemv")  # the fake runner under a declared kernel's name
    out = tmp_path / "sweep.parquet"
    sweep(plan([declared], SHAPES, [1, 4], 90), out, FakeRunner())
    old = store.read_measurement_file(out).assign(kernel_fingerprint="0" * 16)  # as if measured on older code
    store.write_points(out, old)
    points, group, notes = stale_points(old, ENV, "cold")
    assert len(points) == 4 and group is None and notes == []
    result = sweep(points, out, FakeRunner(), remeasure=True)  # what `profile --stale` runs
    new = store.read_measurement_file(out)
    assert result.measured == 4 and len(new) == 4
    assert (new["kernel_fingerprint"] == fingerprint.current("fp32_gemv")).all() and new["run_id"].nunique() == 1
    assert stale_points(new, ENV, "cold")[0] == []


def test_cli_gives_the_hot_files_command_with_hot(tmp_path, capsys):
    folder = tmp_path / "measurements" / "h200-sxm"
    folder.mkdir(parents=True)
    store.write_points(folder / "hot.parquet", frame([point("wg_w8a16", "w8a16", 16, 1e-5, mode="hot",
                                                            kernel_fingerprint="0" * 16)]))
    assert main(["stale", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"on h200-sxm: workbench profile --stale --out {folder / 'hot.parquet'} --hot")

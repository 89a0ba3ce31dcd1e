"""The CLI contract under fuzzing: every bad invocation of every `workbench` subcommand and of `app.py` gives exit code
2, exactly one line on stderr starting "error: ", no traceback, and leaves every file as it was.

Property-based (hypothesis): a valid argument vector per command with exactly one bad thing injected (a bad value for
one option, an option without its value, an unknown option, a stray argument, a bad environment value), >= 300 per
run, in process; the named cases of issue 16 as fixed examples; a handful through real subprocesses. Each test prints
how many inputs it tried.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app as app_module
from tests.compare_fixtures import calibration, frame, point
from workbench.interfaces import cli_args
from workbench.interfaces.cli import click_command, main
from workbench.storage.store import write_calibration, write_points

ROOT = Path(__file__).resolve().parents[1]
FUZZ_EXAMPLES = int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES", "320"))  # more for a deeper hunt
HYPOTHESES = '[[hypothesis]]\nid = "ok"\nkind = "speedup"\na = "w4a16"\nb = "bf16"\nbatch = [1]\nop = ">="\nvalue = 2\n'
NO_GPU = ("CuPy is not importable", "no CUDA GPU found")
TRIED = {"fuzz": 0, "named": 0, "subprocess": 0}


# ---------------------------------------------------------------------------------------------------- the sandbox
@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Path:
    """A folder holding a small data dir, files a bad command must not touch, and traps (a folder named like a CSV,
    a data dir whose measurements/ is a regular file)."""
    root = tmp_path_factory.mktemp("fuzz")
    data = root / "data"
    rows = [point("cublas_bf16", "bf16", m, 13e-6, role="peer") for m in (1, 4)]
    rows += [point("w4a16_gemv", "w4a16", m, 4e-6) for m in (1, 4)]
    write_points(data / "measurements" / "h200-sxm" / "sweep.parquet", frame(rows))
    write_calibration(data / "calibration", calibration())
    (data / "hypotheses").mkdir()
    (data / "hypotheses" / "mine.toml").write_text(HYPOTHESES)
    (root / "existing.csv").write_text("keep,me\n1,2\n")
    (root / "existing.html").write_text("<p>keep me</p>\n")
    (root / "empty.toml").write_text("")
    (root / "notes.txt").write_text("not a folder\n")
    (root / "folder.csv").mkdir()
    broken = root / "broken"
    broken.mkdir()
    (broken / "measurements").write_text("a regular file where a folder belongs\n")
    return root


def snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = ("dir",) if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns,
                                                 hashlib.sha1(p.read_bytes()).hexdigest())
    return out


def run_inprocess(argv: list[str], env: dict[str, str] | None = None, app: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = app_module.main(argv) if app else main(argv)
            except SystemExit as exc:  # must not happen: main returns its code
                code = f"SystemExit({exc.code})"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()


def assert_refused(root: Path, argv: list[str], env: dict[str, str] | None = None, app: bool = False,
                   before_gpu: bool = False) -> str:
    """The contract for one bad invocation; returns the error line."""
    before = snapshot(root)
    code, out, err = run_inprocess(argv, env, app)
    shown = f"{'app.py' if app else 'workbench'} {argv!r} env={env}: exit {code}\nstderr: {err[-800:]}"
    assert code == 2, shown
    lines = err.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) > 12, shown
    assert "Traceback" not in err + out, shown
    assert snapshot(root) == before, f"files changed by {shown}"
    if before_gpu:  # the bad argument is reported, not the missing GPU
        assert not any(n in err for n in NO_GPU), shown
    return lines[0]


# ---------------------------------------------------------------------------------------------------- strategies
def _options(command: str) -> set[str]:
    click_cmd = click_command()
    cmd = click_cmd.commands[command] if command else click_cmd
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}


def _valued_options(command: str) -> list[str]:
    """The long options of `command` that take a value (from the click command typer builds)."""
    cmd = click_command().commands[command]
    return sorted(o for p in cmd.params if getattr(p, "param_type_name", "") == "option"
                  and not getattr(p, "is_flag", False) and not getattr(p, "count", False)
                  for o in p.opts if o.startswith("--"))


def commands() -> list[str]:
    """Every registered command: those with a valid base vector below get every kind of bad input; the others
    (commands added later) get the kinds that need no valid vector: unknown options and options without a value."""
    return sorted(click_command().commands)


TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=24)
INT_WORDS = ["", " ", "abc", "1.5", "1e3", "0x10", "nan", "inf", "-0", "٣", "1_000", "9" * 30, "9" * 5000, "+-1"]


def bad_int(low: int, high: int) -> st.SearchStrategy[str]:
    def valid(s: str) -> bool:
        t = s.strip()
        return bool(re.fullmatch(r"[+-]?[0-9]{1,12}", t)) and low <= int(t) <= high

    return st.one_of(st.sampled_from(INT_WORDS), st.integers(max_value=low - 1).map(str),
                     st.integers(min_value=high + 1).map(str), TEXT.filter(lambda s: not valid(s)))


def bad_batch() -> st.SearchStrategy[str]:
    gaps = st.sampled_from(["1,,2", ",1", "1,", " , ", "1,abc", "4,0", "1;2", "1 2", "65537", "1,65537"])
    return st.one_of(gaps, bad_int(1, cli_args.MAX_BATCH))


def bad_shape() -> st.SearchStrategy[str]:
    from models.workloads import SHAPES

    def valid(s: str) -> bool:
        m = re.fullmatch(r"\s*([0-9]+)\s*[xX×]\s*([0-9]+)\s*", s)
        ok = m and all(0 < int(g) <= cli_args.MAX_DIM for g in m.groups() if len(g) < 20)
        return bool(ok) or s.strip() in SHAPES

    words = ["", "x", "4096", "4096x", "x4096", "0x4096", "4096x0", "-1x4096", "4096by4096", "1.5x2", "4096x4096x1",
             "9" * 20 + "x4096", "9" * 5000 + "x1", "2097152x4096", "4096x2097152", "٤x4"]
    return st.one_of(st.sampled_from(words), TEXT.filter(lambda s: not valid(s)))


def bad_name(valid: set[str], allow: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    ok = {v.casefold() for v in valid} | set(allow)

    def is_valid(s: str) -> bool:
        parts = [p.strip().casefold() for p in s.split(",")]
        return all(parts) and all(p in ok for p in parts)

    return st.one_of(st.sampled_from(["", " ", ",", "a,,b", "h200-sxm,"]), TEXT.filter(lambda s: not is_valid(s)))


def bad_choice(choices: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.one_of(st.just(""), TEXT.filter(lambda s: s not in choices))


def bad_path(suffix: str, traps: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(["", *traps]), TEXT.filter(lambda s: not s.lower().endswith(suffix)))


def _catalogues():
    from kernels import registry
    from models.hardware import load_gpus
    from models.schemes import SCHEME_NAMES
    from models.workloads import MODELS

    gpus = {n for g in load_gpus().values() for n in (g.key, g.name, *g.device_names)}
    return gpus, set(SCHEME_NAMES), {s.name for s in registry.specs()}, set(MODELS)


def bad_values() -> dict[str, dict[str, st.SearchStrategy[str]]]:
    gpus, schemes, kernels, models = _catalogues()
    data = st.sampled_from(["", "nope", "broken", "notes.txt"])
    csv = bad_path(".csv", ("notes.txt", "x.txt", "folder.csv", "existing"))
    html = bad_path(".html", ("existing.csv", "x.pdf"))
    return {
        "predict": {"--gpu": bad_name(gpus), "--scheme": bad_name(schemes, ("all",)), "--batch": bad_batch(),
                    "-M": bad_batch(), "--shape": bad_shape(), "--model": bad_name(models),
                    "--baseline": bad_name(schemes), "--group-size": bad_int(1, cli_args.MAX_GROUP),
                    "--tier": bad_choice(("datasheet", "calibrated", "floor")), "--csv": csv, "--data-dir": data},
        "export": {"--table": bad_choice(("comparison", "speedups", "crossovers", "errors")),
                   "--rollup": bad_name(models), "--gpu": bad_name(gpus), "--scheme": bad_name(schemes),
                   "--kernel": bad_name(kernels), "--shape": bad_shape(), "--batch": bad_batch(),
                   "--mode": bad_choice(("cold", "hot")), "--data-dir": data},
        "validate": {"--hypotheses": st.sampled_from(["", "missing.toml", "empty.toml", "folder.csv"]),
                     "--source": bad_choice(("measured", "predicted", "both")), "--html": html, "--csv": csv,
                     "--gpu": bad_name(gpus), "--data-dir": data},
        "report": {"--hypotheses": st.sampled_from(["", "missing.toml", "empty.toml"]),
                   "--source": bad_choice(("measured", "predicted", "both")), "--gpu": bad_name(gpus),
                   "--data-dir": data},
        "profile": {"--scheme": bad_name(schemes), "--kernel": bad_name(kernels), "--exclude": bad_name(kernels),
                    "--batch": bad_batch(), "-M": bad_batch(), "--shape": bad_shape(), "--model": bad_name(models),
                    "--out": bad_path(".parquet", ("folder.csv", "x.csv")),
                    "--budget": st.sampled_from(["0", "-1", "nan", "inf", "-inf", "abc", "", "1e9"])},
        "serve": {"--port": bad_int(1, 65535), "--host": st.sampled_from(["", " "]), "--data-dir": data},
    }


BASE = {  # valid vectors (apart from needing a GPU for profile): exactly one bad thing is injected into them
    "predict": ["predict", "--batch", "1", "--shape", "4096x4096", "--scheme", "w4a16"],
    "gpus": ["gpus"],
    "schemes": ["schemes"],
    "export": ["export", "out.csv", "--data-dir", "data"],
    "validate": ["validate", "--data-dir", "data"],
    "report": ["report", "out.html", "--data-dir", "data"],
    "profile": ["profile", "--kernel", "w4a16_gemv", "--batch", "1", "--shape", "4096x4096", "--out",
                "o/s.parquet", "--no-progress"],
    "calibrate": ["calibrate", "--out", "cal"],
    "env": ["env"],
    "serve": ["serve", "--port", "1"],  # port 1 cannot be bound by the tests (root aside): every serve here is bad
}
POSITIONAL = {"export": ("csv", bad_path(".csv", ("notes.txt", "folder.csv", "existing"))),
              "report": ("html", bad_path(".html", ("existing.csv", "x.pdf")))}


def _inject(base: list[str], option: str, value: str) -> list[str]:
    argv = list(base)
    if option in argv:
        argv[argv.index(option) + 1] = value
        return argv
    return [*argv, option, value]


@st.composite
def bad_invocation(draw) -> tuple[list[str], dict[str, str], str]:
    """(argv, environment, what was injected)."""
    values = bad_values_cached()
    command = draw(st.sampled_from(commands()))
    base = BASE.get(command, [command])
    kinds = ["unknown option", "missing value"] + (["stray argument"] if command in BASE else [])
    if command in values:
        kinds += ["bad value"] * 4
    if command in POSITIONAL:
        kinds += ["bad positional"]
    if command == "serve":
        kinds += ["bad environment"]
    kind = draw(st.sampled_from(kinds))
    env: dict[str, str] = {}
    if kind == "bad value":
        option = draw(st.sampled_from(sorted(values[command])))
        argv = _inject(base, option, draw(values[command][option]))
    elif kind == "bad positional":
        argv = [command, draw(POSITIONAL[command][1]), *base[2:]]
    elif kind == "unknown option":
        known = _options(command)
        name = draw(st.from_regex(r"--[a-z][a-z0-9-]{0,14}", fullmatch=True).filter(lambda o: o not in known))
        argv = [*base, name] if draw(st.booleans()) else [*base, name, "1"]
    elif kind == "stray argument":
        if command in POSITIONAL:  # one positional already: a second is stray
            argv = [*base, draw(st.sampled_from(["extra", "1", "x.csv"]))]
        else:
            argv = [*base, draw(TEXT.filter(lambda s: s and not s.startswith("-")))]
    elif kind == "missing value":
        valued = _valued_options(command)
        argv = [*base, draw(st.sampled_from(valued))] if valued else [*base, "--frobnicate"]
    else:  # bad environment for serve
        var = draw(st.sampled_from(["WORKBENCH_PORT", "WORKBENCH_DATA", "WORKBENCH_HOST"]))
        bad = {"WORKBENCH_PORT": bad_int(1, 65535), "WORKBENCH_DATA": st.sampled_from(["nope", "broken", "notes.txt"]),
               "WORKBENCH_HOST": st.sampled_from([" ", "\t"])}[var]
        env = {var: draw(bad)}
        argv = ["serve"]
    return argv, env, kind


_VALUES: dict = {}


def bad_values_cached():
    if not _VALUES:
        _VALUES.update(bad_values())
    return _VALUES


# ---------------------------------------------------------------------------------------------------- the tests
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(case=bad_invocation())
def _fuzz_one(root: Path, case) -> None:
    argv, env, kind = case
    TRIED["fuzz"] += 1
    before_gpu = argv[0] == "profile" and kind != "stray argument"
    assert_refused(root, argv, env or None, before_gpu=before_gpu)


def test_fuzzed_bad_invocations_are_refused_cleanly(sandbox, monkeypatch, capsys):
    monkeypatch.chdir(sandbox)
    monkeypatch.delenv("WORKBENCH_PORT", raising=False)
    monkeypatch.delenv("WORKBENCH_HOST", raising=False)
    monkeypatch.delenv("WORKBENCH_DATA", raising=False)
    repo_data = snapshot(ROOT / "data")
    TRIED["fuzz"] = 0
    _fuzz_one(sandbox)
    assert snapshot(ROOT / "data") == repo_data
    with capsys.disabled():
        print(f"\nCLI fuzz: {TRIED['fuzz']} bad invocations tried, all refused cleanly (exit 2, one line, "
              f"no traceback, no file changed)")
    assert TRIED["fuzz"] >= 300


LONG = "9" * 10000
NAMED = [  # issue 16's named cases: (argv, environment, app.py?, reported before looking for a GPU?)
    ([], None, False, False),
    (["frobnicate"], None, False, False),
    (["predict", "--frobnicate"], None, False, False),
    (["export"], None, False, False),
    (["predict", "--gpu"], None, False, False),
    (["predict", "--group-size", "abc"], None, False, False),
    (["export", "x.csv", "--batch", "abc", "--data-dir", "data"], None, False, False),
    (["serve", "--port", "abc"], None, False, False),
    (["--port", "70000"], None, True, False),
    (["predict", "--shape", f"{LONG}x4096"], None, False, False),
    (["predict", "--shape", "99999999999999999999999x4096"], None, False, False),
    (["serve", "--host", "no.such.host.invalid"], None, False, False),
    (["--host", "no.such.host.invalid"], None, True, False),
    (["export", "existing.csv", "--data-dir", "broken"], None, False, False),
    (["predict", "--gpu", ""], None, False, False),
    (["predict", "--scheme", ""], None, False, False),
    (["predict", "--shape", ""], None, False, False),
    (["predict", "--batch", ""], None, False, False),
    (["export", "x.csv", "--gpu", "", "--data-dir", "data"], None, False, False),
    (["export", "x.csv", "--batch", "", "--data-dir", "data"], None, False, False),
    (["profile", "--scheme", ""], None, False, True),
    (["profile", "--batch", ""], None, False, True),
    (["profile", "--shape", ""], None, False, True),
    (["predict", "--batch", "1000000000"], None, False, False),
    (["profile", "--batch", "1000000000"], None, False, True),
    (["predict", "--csv", "x.txt"], None, False, False),
    (["export", "x.csv", "--gpu", "a100-sxm-80gb", "--data-dir", "data"], None, False, False),
    (["export", "x.csv", "--batch", "3", "--data-dir", "data"], None, False, False),
    (["validate", "--hypotheses", "empty.toml", "--data-dir", "data"], None, False, False),
    (["serve"], {"WORKBENCH_PORT": "0"}, False, False),
    ([], {"WORKBENCH_PORT": "0"}, True, False),
    ([], {"WORKBENCH_PORT": "http"}, True, False),
    (["profile", "--batch", "0"], None, False, True),
    (["profile", "--batch", "0", "--out", "new/s.parquet"], None, False, True),
    (["calibrate", "--out", "newcal"], None, False, False),
    (["profile", "--out", "new/s.parquet"], None, False, False),
]


@pytest.mark.parametrize(("argv", "env", "app", "before_gpu"), NAMED, ids=[f"named{i}" for i in range(len(NAMED))])
def test_named_cases_of_issue_16(sandbox, monkeypatch, capsys, argv, env, app, before_gpu):
    monkeypatch.chdir(sandbox)
    for var in ("WORKBENCH_PORT", "WORKBENCH_HOST", "WORKBENCH_DATA"):
        monkeypatch.delenv(var, raising=False)
    line = assert_refused(sandbox, argv, env, app=app, before_gpu=before_gpu)
    TRIED["named"] += 1
    assert (sandbox / "existing.csv").read_text() == "keep,me\n1,2\n"
    assert not (sandbox / "data" / "calibration").joinpath("..", "..", "newcal").exists()
    if argv[:1] == ["export"] and "--batch" in argv and "3" in argv:
        assert "matches no measured point" in line and "1, 4" in line  # says why and what the data holds


def test_a_port_in_use_is_one_line_before_any_banner(sandbox, monkeypatch):
    import socket

    monkeypatch.chdir(sandbox)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = str(s.getsockname()[1])
        for argv, app in ((["serve", "--port", port], False), (["--port", port], True)):
            line = assert_refused(sandbox, argv, app=app)
            assert "in use" in line and port in line


SUBPROCESS = [
    ["-m", "workbench"],
    ["-m", "workbench", "frobnicate"],
    ["-m", "workbench", "predict", "--gpu"],
    ["-m", "workbench", "predict", "--shape", f"{LONG}x4096"],
    ["-m", "workbench", "serve", "--port", "abc"],
    ["app.py", "--port", "70000"],
]


def test_subprocesses_exit_2_with_one_line(sandbox, capsys):
    for args in SUBPROCESS:
        if args[0] == "app.py":
            args = [str(ROOT / "app.py"), *args[1:]]
        before = snapshot(sandbox)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
        env["PYTHONPATH"] = str(ROOT)
        proc = subprocess.run([sys.executable, *args], cwd=sandbox, capture_output=True, text=True, timeout=120,
                              env=env)
        lines = proc.stderr.rstrip("\n").split("\n")
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, proc.stderr)
        assert snapshot(sandbox) == before
        TRIED["subprocess"] += 1
    with capsys.disabled():
        print(f"\nCLI named cases: {TRIED['named']} in process + {TRIED['subprocess']} subprocesses, refused cleanly")


def test_an_eoferror_in_a_command_is_one_error_line_and_exit_2(sandbox, monkeypatch):
    """typer >= 0.16 turns an EOFError raised in a command (a truncated file read) into its own typer.exceptions.Abort,
    which derives from no click class: refused in one line, exit 2, not a traceback (typer writes an empty line
    first)."""
    from workbench.analysis import quant_error

    def truncated(*_args, **_kwargs):
        raise EOFError("No data left in file")

    monkeypatch.setattr(quant_error, "load_matrix", truncated)
    code, out, err = run_inprocess(["quant-error", "--weights", str(sandbox / "w.npy")])
    assert code == 2 and "Traceback" not in err + out, err
    assert err.strip().splitlines() == ["error: unexpected end of input (No data left in file)"], err

"""Mutation-testing benchmark: mutmut 3 on one module at a time, with only the tests that reach it.

    python scripts/mutation.py models/schemes.py kernels/quant/quant.py   # some modules
    python scripts/mutation.py --all                                # every module in scripts/mutation.toml
    python scripts/mutation.py --report models/schemes.py           # re-read a finished run: score and survivors

Each module runs in its own scratch copy of the tree (--workdir, default /tmp/roofline-mutation/<module>) so the
repository never receives mutmut's `mutants/` folder and two modules never share state. The copy gets a setup.cfg
that tells mutmut which file to mutate and which tests to run (scripts/mutation.toml); mutmut then runs, for each
mutant, only the listed tests that reached the mutated function in a clean run. One worker by default.

Score = killed (incl. timeouts) / (mutants that some test reached). "no tests" mutants are counted and listed
separately: code that no listed test reaches. Survivors are printed as diffs (mutmut show) for review; the
reviewed list lives in docs/testing.md. Not a CI job: it takes minutes per module on two cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "scripts" / "mutation.toml"
COPY = ("models", "kernels", "workbench", "tests", "data", "app.py", "pyproject.toml")
KILLED = {1, 3, 36, -24, 24, 152, 255}  # exit codes mutmut counts as killed or timed out
NO_TESTS = {5, 33}


def load_config() -> dict:
    with CONFIG.open("rb") as f:
        return tomllib.load(f)


def slug(module: str) -> str:
    return module.replace("/", "__").removesuffix(".py")


def prepare(module: str, spec: dict, run: dict, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "screenshots")
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore)
        else:
            shutil.copy2(src, work / name)
    args = list(run.get("pytest_args", []))
    for nodeid in spec.get("deselect", []):
        args += ["--deselect", nodeid]
    lines = ["[mutmut]", "source_paths =", "    models", "    kernels", "    workbench",
             f"only_mutate = {module}", "also_copy =", "    data", "    app.py",
             "pytest_add_cli_args_test_selection ="]
    lines += [f"    {t}" for t in spec["tests"]]
    lines += ["pytest_add_cli_args ="] + [f"    {a}" for a in args]
    lines += ["use_git_change_detection = false", ""]
    (work / "setup.cfg").write_text("\n".join(lines))


def summarize(module: str, work: Path) -> dict:
    meta = work / "mutants" / (module + ".meta")
    if not meta.exists():
        raise SystemExit(f"no mutmut results for {module} under {work}; run it first")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    killed = sorted(k for k, c in codes.items() if c in KILLED)
    survived = sorted(k for k, c in codes.items() if c == 0)
    no_tests = sorted(k for k, c in codes.items() if c in NO_TESTS)
    other = sorted(k for k, c in codes.items() if k not in set(killed) | set(survived) | set(no_tests))
    reached = len(killed) + len(survived) + len(other)
    score = 100.0 * len(killed) / reached if reached else 0.0
    return {"module": module, "mutants": len(codes), "killed": len(killed), "survived": survived,
            "no_tests": no_tests, "other": {k: codes[k] for k in other}, "score": round(score, 1)}


def show(work: Path, names: list[str]) -> str:
    parts = []
    for name in names:
        diff = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, capture_output=True,
                              text=True).stdout
        changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        parts.append(f"## {name}\n" + "\n".join(changed) + "\n")
    return "\n".join(parts)


def run_module(module: str, spec: dict, run: dict, work: Path, children: int) -> dict:
    prepare(module, spec, run, work)
    start = time.monotonic()
    with (work / "mutmut.log").open("w") as log:
        proc = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(children)], cwd=work,
                              stdout=log, stderr=subprocess.STDOUT)
    result = summarize(module, work) if proc.returncode == 0 else {"module": module, "error": proc.returncode}
    result["wall_s"] = round(time.monotonic() - start, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    cfg = load_config()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*", help="modules as listed in scripts/mutation.toml")
    ap.add_argument("--all", action="store_true", help="every module in scripts/mutation.toml")
    ap.add_argument("--report", action="store_true", help="summarize finished runs, do not run")
    ap.add_argument("--markdown", action="store_true", help="with --report: one table row per module (docs/testing.md)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/roofline-mutation"))
    ap.add_argument("--max-children", type=int, default=cfg["run"].get("max_children", 1))
    args = ap.parse_args(argv)
    modules = list(cfg["modules"]) if args.all else args.modules
    unknown = [m for m in modules if m not in cfg["modules"]]
    if unknown or not modules:
        print(f"unknown or no module(s) {', '.join(unknown)}; accepted: {', '.join(cfg['modules'])}", file=sys.stderr)
        return 2
    results = []
    for module in modules:
        work = args.workdir / slug(module)
        if args.report:
            res = summarize(module, work)
        else:
            res = run_module(module, cfg["modules"][module], cfg["run"], work, args.max_children)
        results.append(res)
        if args.markdown:
            n_surv = len(res["survived"])
            print(f"| `{module}` | {res['mutants']} | {res['killed']} | {n_surv} | {res['score']:.1f} % |")
            continue
        if "error" in res:
            print(f"{module}: mutmut exited {res['error']}; see {work / 'mutmut.log'}")
            continue
        print(f"{module}: {res['score']:.1f} % ({res['killed']} killed / {res['killed'] + len(res['survived'])} "
              f"reached, {len(res['survived'])} survived, {len(res['no_tests'])} not reached, "
              f"{len(res['other'])} other) in {res.get('wall_s', '-')} s")
        if res["survived"]:
            (work / "survivors.txt").write_text(show(work, res["survived"]))
            print(f"  survivor diffs: {work / 'survivors.txt'}")
        (work / "summary.json").write_text(json.dumps(res, indent=1))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

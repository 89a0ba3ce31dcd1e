"""Imports point down the data flow: measure -> store -> analysis -> interfaces (DESIGN.md, "Layers").

Every module's imports are read with `ast` (module level and inside functions, plus `importlib.import_module("...")`
with a literal name) and checked against the rooms' rules:
- workbench.storage imports nothing else from the workbench, and no kernels;
- workbench.measure may import storage (and kernels: it launches them); never analysis or the interfaces;
- workbench.analysis may import storage, never measure; of `kernels` only the NumPy quantizers and float64 references
  (kernels.quant.quant, kernels.reference: the error explorer's arithmetic, bit-for-bit what the kernels store, and
  the kernels.quant package that holds the former), never the registry or a provider (kernel facts come from
  data/model/kernel-facts.json);
- workbench.interfaces import anything below; its dashboard only analysis, storage, models and itself, and never
  cupy/pynvml/torch/ray, not even inside a function;
- models import neither workbench nor kernels; kernels never import workbench;
- cupy, pynvml, torch, ray (and cuda) load lazily everywhere: no module-level import of them.
A subprocess then imports every dashboard module, builds the app and loads the shipped data, and checks that no
kernel provider, registry or GPU library came with it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workbench", "models", "kernels")
LAZY = ("cupy", "pynvml", "torch", "ray", "cuda")
ROOMS = ("storage", "measure", "analysis", "interfaces")
ALLOWED_ROOMS = {
    "storage": {"storage"},
    "measure": {"storage", "measure"},
    "analysis": {"storage", "analysis"},
    "interfaces": {"storage", "measure", "analysis", "interfaces"},
}
ANALYSIS_KERNELS = {"kernels.quant", "kernels.quant.quant", "kernels.reference"}
DASHBOARD = "workbench.interfaces.dashboard"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    p = ROOT.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def imports(module: str, source: str, is_package: bool = False) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import in `source`, relative ones resolved."""
    tree = ast.parse(source)
    top = {id(n) for n in tree.body} | {id(n) for s in tree.body if isinstance(s, (ast.If, ast.Try)) for n in
                                          ast.walk(s)}
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        level = id(node) in top
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, level) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub if _is_module(sub) else base, node.lineno, level))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.args[0].value, node.lineno, level))
    return out


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "workbench":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "interfaces"  # workbench, __main__: the entry


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """Each import of `module` that breaks a rule, as 'module:line imports target (why)'."""
    bad = []
    room = _room(module)
    dashboard = module == DASHBOARD or module.startswith(DASHBOARD + ".")
    for target, line, at_top in imports(module, source, is_package):
        head = target.split(".")[0]
        why = ""
        if head in LAZY and (at_top or dashboard):
            why = "GPU/cluster libraries load lazily" + (" (and never in the dashboard)" if dashboard else "")
        elif module.startswith("models") and head in ("workbench", "kernels"):
            why = "models are the bottom layer"
        elif module.startswith("kernels") and head == "workbench":
            why = "kernels never import the workbench"
        elif room is not None and head == "workbench" and target != "workbench":
            to = _room(target)
            if to not in ALLOWED_ROOMS[room]:
                why = f"{room} may import only {', '.join(sorted(ALLOWED_ROOMS[room]))}"
            elif dashboard and to != "storage" and to != "analysis" and not target.startswith(DASHBOARD):
                why = "the dashboard reads only analysis, storage and models"
        elif room is not None and head == "kernels":
            if room == "storage" or dashboard:
                why = f"{'the dashboard' if dashboard else 'storage'} never imports kernels"
            elif room == "analysis" and target not in ANALYSIS_KERNELS:
                why = f"analysis uses only {', '.join(sorted(ANALYSIS_KERNELS))} of kernels"
        if why:
            bad.append(f"{module}:{line} imports {target} ({why})")
    return bad


def test_every_import_points_down_the_flow():
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert len(files) > 80
    bad = [v for p in files for v in violations(module_name(p), p.read_text(), p.name == "__init__.py")]
    assert bad == [], "\n".join(bad)


def test_every_room_is_populated():
    for room in ROOMS:
        assert len(list((ROOT / "workbench" / room).glob("*.py"))) >= 4, room
    assert sorted(p.name for p in (ROOT / "workbench").glob("*.py")) == ["__init__.py", "__main__.py"]


def test_the_checker_catches_wrong_imports():
    cases = {
        ("workbench.storage.store", "from workbench.analysis import compare"): "storage may import only",
        ("workbench.analysis.compare", "def f():\n    from workbench.measure import profiler"): "analysis may",
        ("workbench.analysis.speedup", "from kernels.registry import specs"): "analysis uses only",
        ("workbench.measure.timing", "from workbench.interfaces.format import fmt_time"): "measure may",
        ("workbench.measure.timing", "import cupy as cp"): "load lazily",
        ("workbench.interfaces.dashboard.views", "def f():\n    import torch"): "never in the dashboard",
        ("workbench.interfaces.dashboard.views", "from workbench.measure import nvml"): "only analysis, storage",
        ("workbench.interfaces.dashboard.views", "from workbench.interfaces import cli_args"): "only analysis",
        ("workbench.interfaces.dashboard.data", "from kernels import quant"): "the dashboard never imports kernels",
        ("models.roofline", "from workbench.storage import schema"): "bottom layer",
        ("kernels.gemv.gemv", "import importlib\nimportlib.import_module('workbench.measure.timing')"):
            "never import the",
    }
    for (module, source), why in cases.items():
        got = violations(module, source)
        assert len(got) == 1 and why in got[0], (module, source, got)
    fine = {
        ("workbench.measure.profiler", "from workbench.storage import store\nfrom kernels import registry"),
        ("workbench.analysis.quant_error", "from kernels import quant, reference"),
        ("workbench.interfaces.cli_profile", "def f():\n    import cupy"),
        ("workbench.interfaces.dashboard.views", "from workbench.analysis import speedup\nfrom . import queries"),
    }
    for module, source in fine:
        assert violations(module, source) == [], (module, source)
    assert imports("workbench.interfaces.dashboard.views", "from .queries import x")[0][0] == f"{DASHBOARD}.queries"


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (module level, inside functions and under TYPE_CHECKING alike)."""
    files = {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    return {m: {t for t, _, _ in imports(m, p.read_text(), p.name == "__init__.py") if t in files and t != m}
            for m, p in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph: every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    """One module owns a type and the other imports it: no two modules import each other, directly or around."""
    graph = import_graph()
    assert len(graph) > 80
    assert circles(graph) == []


def test_the_circle_check_catches_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    graph = import_graph()  # the two circles issue 35 removed, put back: each is found
    graph["workbench.analysis.hypothesis_eval"].add("workbench.analysis.hypotheses")
    graph["workbench.interfaces.dashboard.callbacks"].add("workbench.interfaces.dashboard.wiring")
    assert circles(graph) == [["workbench.analysis.hypotheses", "workbench.analysis.hypothesis_eval"],
                              ["workbench.interfaces.dashboard.callbacks", "workbench.interfaces.dashboard.wiring"]]


PROBE = """
import importlib, json, pkgutil, sys
import workbench.interfaces.dashboard as d
for m in pkgutil.walk_packages(d.__path__, d.__name__ + "."):
    importlib.import_module(m.name)
at_import = sorted(sys.modules)
from workbench.interfaces.dashboard.data import load_data
from workbench.interfaces.dashboard.factory import create_app
create_app()
load_data()
print(json.dumps({"import": at_import, "serve": sorted(sys.modules)}))
"""


def test_the_dashboard_starts_without_kernels_or_gpu_libraries():
    got = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    mods = json.loads(got.stdout.strip().splitlines()[-1])
    heads = {m: {n.split(".")[0] for n in names} for m, names in mods.items()}
    assert not heads["import"] & {"kernels", *LAZY}, heads["import"] & {"kernels", *LAZY}
    assert not heads["serve"] & set(LAZY)
    # serving (figures warmed, the lessons views computed) may use the NumPy quantizers, nothing else of kernels
    assert {m for m in mods["serve"] if m.startswith("kernels.")} <= ANALYSIS_KERNELS
    assert not {m for m in mods["serve"] if m.startswith("workbench.measure")}

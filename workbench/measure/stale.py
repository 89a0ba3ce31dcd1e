"""Which measured rows measure code that has changed since (`workbench stale`; `model-fit` says how many it fits on;
`workbench profile --stale` measures their points again).

A row is
- **current** when the code of its kernel (kernels.fingerprint) is the code installed here;
- **changed** when it is not: the kernel's CUDA sources, its launcher or their tables changed after the row was
  measured, so the row may no longer say what the kernel does (`workbench profile --stale` measures it again);
- **unknown** when that cannot be told: the kernel is not one this workbench declares, or a row written before rows
  carried `kernel_fingerprint` names a commit this checkout cannot read (no git, a shallow clone, "-dirty").
A row's recorded fingerprint is compared as it is; an older row's code is read at its `git_commit` from the git
repository the workbench runs from, with the same fingerprint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from kernels import fingerprint
from models.errors import InputError
from workbench.measure.environment import Environment
from workbench.measure.profiler import Point, Shape

STATUSES = ("changed", "unknown", "current")  # the order a report lists them in
GROUP = ["gpu_key", "mode", "kernel", "git_commit", "kernel_fingerprint"]
STATUS_COLUMNS = ["gpu_key", "mode", "kernel", "git_commit", "points", "status", "basis"]


class _Commits:
    """The code fingerprint of each kernel at each commit, read once (one GitTree per commit)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.trees: dict[str, fingerprint.GitTree | None] = {}
        self.then: dict[tuple[str, str], str | None] = {}
        self.git = (repo / ".git").exists()

    def close(self) -> None:
        for tree in self.trees.values():
            if tree is not None:
                tree.close()

    def status(self, kernel: str, commit: str, now: str) -> tuple[str, str]:
        if not commit or commit == "unknown":
            return "unknown", "no kernel_fingerprint and no git_commit recorded"
        if commit.endswith("-dirty"):
            return "unknown", f"no kernel_fingerprint; measured from uncommitted changes ({commit[:7]}…-dirty)"
        if not self.git:
            return "unknown", f"no kernel_fingerprint; no git repository at {self.repo} to read {commit[:7]} from"
        if commit not in self.trees:
            tree = fingerprint.GitTree(commit, self.repo)
            self.trees[commit] = tree if tree.exists() else None
        tree = self.trees[commit]
        if tree is None:
            return "unknown", f"no kernel_fingerprint; commit {commit[:7]} is not in the repository at {self.repo}"
        if (kernel, commit) not in self.then:
            self.then[(kernel, commit)] = fingerprint.of_kernel(kernel, tree)
        then = self.then[(kernel, commit)]
        if then is None:
            return "unknown", f"no kernel_fingerprint; the kernel's code is not where it is now at {commit[:7]}"
        return ("current" if then == now else "changed"), f"code at {commit[:7]}"


def _normalized(rows: pd.DataFrame) -> pd.DataFrame:
    fp = rows["kernel_fingerprint"].fillna("").astype(str) if "kernel_fingerprint" in rows.columns else ""
    return rows.assign(kernel_fingerprint=fp, git_commit=rows["git_commit"].fillna("").astype(str),
                       gpu_key=rows["gpu_key"].fillna("").astype(str), mode=rows["mode"].fillna("").astype(str))


def _groups(frame: pd.DataFrame, keys: list[str], repo: Path,
            current: Callable[[str], str]) -> list[tuple[dict, pd.Index, str, str]]:
    """(key values, row index, status, basis) of each group of `frame` by `keys`."""
    commits, out = _Commits(repo), []
    try:
        for key, group in frame.groupby(keys, sort=True, dropna=False):
            found = dict(zip(keys, key, strict=True))
            kernel, recorded, now = found["kernel"], found["kernel_fingerprint"], current(found["kernel"])
            if not now:
                status, basis = "unknown", "not a kernel this workbench declares"
            elif recorded:
                status, basis = ("current" if recorded == now else "changed"), "kernel_fingerprint recorded"
            else:
                status, basis = commits.status(kernel, found["git_commit"], now)
            out.append((found, group.index, status, basis))
    finally:
        commits.close()
    return out


def code_status(rows: pd.DataFrame, repo: Path = fingerprint.ROOT,
                current: Callable[[str], str] = fingerprint.current) -> pd.DataFrame:
    """One row per (GPU kind, mode, kernel, commit, recorded fingerprint) of `rows` (measurement rows): STATUS_COLUMNS,
    after `file` when `rows` has that column; changed first. `current(kernel)` is the installed code's fingerprint
    ("" for a kernel this workbench does not declare)."""
    if rows.empty:
        return pd.DataFrame(columns=STATUS_COLUMNS)
    first = ["file"] if "file" in rows.columns else []
    groups = _groups(_normalized(rows), first + GROUP, repo, current)
    table = pd.DataFrame([{**found, "points": len(index), "status": status, "basis": basis}
                          for found, index, status, basis in groups])
    table["order"] = table["status"].map(STATUSES.index)
    table = table.sort_values(["order", *first, "gpu_key", "kernel"], kind="stable")
    return table[first + STATUS_COLUMNS].reset_index(drop=True)


def row_status(rows: pd.DataFrame, repo: Path = fingerprint.ROOT,
               current: Callable[[str], str] = fingerprint.current) -> pd.Series:
    """The status of each row of `rows`, aligned with it."""
    out = pd.Series("unknown", index=rows.index, dtype="string")
    if not rows.empty:
        for _, index, status, _ in _groups(_normalized(rows), GROUP, repo, current):
            out[index] = status
    return out


def summary(table: pd.DataFrame) -> str:
    """One line: rows by status, and the kernels whose rows measure changed code."""
    if table.empty:
        return "no measured rows"
    points = table.groupby("status")["points"].sum()
    counts = ", ".join(f"{int(points.get(s, 0)):,} {s}" for s in STATUSES if points.get(s, 0))
    changed = sorted(set(table.loc[table["status"] == "changed", "kernel"]))
    tail = f"; changed code: {', '.join(changed)}" if changed else ""
    return f"{int(points.sum()):,} rows: {counts}{tail}"


def stale_points(rows: pd.DataFrame, env: Environment, mode: str,
                 kernels: set[str] | None = None) -> tuple[list[Point], int | None, list[str]]:
    """The points of `rows` (one output file) whose rows measure changed code on this GPU's kind (its catalogue key;
    outside the catalogue: this GPU), in `mode`, of `kernels` (None: any), to measure again (`workbench profile
    --stale`); an MoE row's point carries its expert layer's setup, rebuilt from its model, routing and seed. Also
    the w4a16 group size they were measured at (None: no w4a16 point), and one line per group of changed rows left
    out (another GPU kind, the other mode, a kernel this GPU cannot run, an expert layer that cannot be rebuilt)."""
    from kernels import registry

    changed = _normalized(rows[(row_status(rows) == "changed").to_numpy()])
    changed = changed.assign(routing=changed["routing"].fillna("").astype(str))
    if kernels is not None:
        changed = changed[changed["kernel"].isin(kernels)]
    notes: list[str] = []
    mine = (changed["gpu_key"] == env.gpu_key) if env.gpu_key else (changed["gpu_uuid"].astype(str) == env.gpu_uuid)
    for kind, n in changed.loc[~mine.to_numpy(), "gpu_key"].replace("", "an uncatalogued GPU").value_counts().items():
        notes.append(f"{n} changed rows of {kind} left as they are: measure them on that GPU")
    changed = changed[mine.to_numpy()]
    other = changed["mode"] != mode
    for m, n in changed.loc[other.to_numpy(), "mode"].value_counts().items():
        notes.append(f"{n} changed rows measured {m} left: run again with{'' if m == 'hot' else 'out'} --hot")
    changed = changed[~other.to_numpy()]
    groups = sorted(set(changed.loc[changed["scheme"] == "w4a16", "group_size"].astype(int)))
    if len(groups) > 1:
        raise InputError(f"the changed w4a16 rows were measured at group sizes {groups}; give --kernel to measure "
                         "one group size's kernels at a time")
    points, layers = [], {}
    cc = int(env.compute_capability.replace(".", ""))
    cols = ["kernel", "layer", "N", "K", "M", "routing", "routing_seed"]
    keys = changed[cols].drop_duplicates().sort_values(cols)
    for kernel, layer, N, K, M, routing, seed in keys.itertuples(index=False):
        if routing:  # an MoE expert layer (workbench profile --moe)
            point, why = _moe_point(kernel, str(layer), int(N), int(K), int(M), routing, int(seed), layers)
        else:
            point, why = Point(registry.get(kernel), Shape(str(layer), int(N), int(K)), int(M)), ""
        if point is not None and point.spec.supports(int(M), cc):
            points.append(point)
        else:
            why = why or (point.spec.unsupported(cc) if point else "") or "outside its batch range"
            notes.append(f"{kernel} {layer or f'{N}x{K}'} M={M} left: {why}")
    return points, (groups[0] if groups else None), notes


def _moe_point(kernel: str, layer: str, N: int, K: int, M: int, routing: str, seed: int,
               layers: dict) -> tuple[Point | None, str]:
    """The point of an MoE row: its expert layer rebuilt from the model (the layer's prefix), routing and seed."""
    from workbench.measure import moe_points

    model = layer.partition("/")[0]
    if (model, routing, seed) not in layers:
        try:
            found = moe_points.setups([model], routing, seed)
            layers[(model, routing, seed)] = {shape.layer: (shape, setup) for shape, setup in found}
        except InputError as exc:
            layers[(model, routing, seed)] = str(exc)
    found = layers[(model, routing, seed)]
    if isinstance(found, str):
        return None, found
    if layer not in found or (found[layer][0].N, found[layer][0].K) != (N, K):
        return None, f"{model} has no {N}x{K} expert layer {layer} now"
    shape, setup = found[layer]
    return Point(moe_points.spec(kernel), shape, M, setup), ""

"""Datasets from several machines as one (`workbench merge SRC... --out DEST`).

Rules, in the order they apply:
1. Every input (a .parquet/.csv file, a measurements folder, or a data dir holding measurements/) is read through
   `store.read_measurement_file`: a file that is not a measurement file, or whose schema_version is newer than this
   workbench reads, stops the merge with one line naming it; nothing is written.
2. Every row must name its GPU (`gpu_uuid`): without it two machines' points could not be told apart.
3. Provenance is kept as it is in each row: `host` (an extra column written by `--gpus`/`--ray` sweeps; "" for rows
   that predate it), `gpu_uuid`, `gpu_name`/`gpu_key`, `run_id`, `git_commit`, `timestamp`.
4. Duplicates are rows of the same point on the same device: same `store.POINT_KEY` (gpu_uuid, kernel, scheme, layer,
   M, N, K, mode). The rule: keep the newest by `timestamp`; on a tie the greatest `run_id`, then the greatest
   hash of the row's contents, so the result never depends on the order of the inputs. Points of different GPUs
   (even of one kind) are never duplicates: the analysis layer chooses among them (compare.latest_points).
5. The output is sorted by (gpu_key, gpu_uuid, kernel, scheme, layer, mode, N, K, M) and written atomically, so
   merging the output again with any of its inputs changes nothing (idempotent).
A folder as DEST becomes a data dir: DEST/measurements/merged.parquet, and DEST/calibration/ with the inputs'
calibration files (data dirs only; the newest of one GPU's files), so `workbench validate --data DEST` and
`workbench serve --data DEST` read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from models.errors import InputError
from workbench.storage import store
from workbench.storage.schema import MEASUREMENT_COLUMNS

PROVENANCE = ("host", "gpu_uuid", "gpu_key", "gpu_name", "run_id", "git_commit")
SORT = ["gpu_key", "gpu_uuid", "kernel", "scheme", "layer", "mode", "N", "K", "M"]
MERGED_NAME = "merged.parquet"


@dataclass
class MergeResult:
    frame: pd.DataFrame
    inputs: list[tuple[Path, int]]  # each file read and its rows
    rows_in: int
    duplicates: int
    out: Path | None = None
    calibrations: list[Path] = field(default_factory=list)

    def by_gpu(self) -> pd.DataFrame:
        """One row per (host, gpu_uuid): kind, points, runs and commits (the provenance summary)."""
        df = self.frame
        if df.empty:
            return pd.DataFrame(columns=["host", "gpu_uuid", "gpu_key", "gpu_name", "points", "runs", "commits"])
        g = df.groupby(["host", "gpu_uuid"], sort=True, dropna=False)
        return pd.DataFrame({
            "gpu_key": g["gpu_key"].first(), "gpu_name": g["gpu_name"].first(), "points": g.size(),
            "runs": g["run_id"].nunique(), "commits": g["git_commit"].agg(lambda s: ",".join(sorted(set(s)))),
        }).reset_index()


def read_inputs(sources: Sequence[str | Path]) -> tuple[list[pd.DataFrame], list[tuple[Path, int]]]:
    if not sources:
        raise InputError("merge needs at least one input: .parquet/.csv files, measurement folders or data dirs")
    files = store.measurement_files(list(sources))
    if not files:
        raise InputError(f"no .parquet or .csv measurement file under {', '.join(map(str, sources))}")
    frames, read = [], []
    for f in files:
        df = store.read_measurement_file(f)
        if "host" not in df.columns:
            df["host"] = ""
        df["host"] = df["host"].astype("string").fillna("")
        if len(df) and (df["gpu_uuid"] == "").any():
            raise InputError(f"{f}: {int((df['gpu_uuid'] == '').sum())} rows have no gpu_uuid; merge needs every "
                             "row to name its GPU (re-export the file with the gpu_uuid column)")
        frames.append(df)
        read.append((f, len(df)))
    return frames, read


def merge_frames(frames: Sequence[pd.DataFrame]) -> tuple[pd.DataFrame, int]:
    """Rows of all frames, one per (device, point) by the rule above; returns (frame, duplicates dropped)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        out = store.empty_measurements()
        out["host"] = pd.Series([], dtype="string")
        return out, 0
    df = pd.concat(frames, ignore_index=True)
    extras = sorted(c for c in df.columns if c not in MEASUREMENT_COLUMNS)
    df = df[list(MEASUREMENT_COLUMNS) + extras]
    df["host"] = df["host"].astype("string").fillna("")
    n = len(df)
    df = df.assign(_h=pd.util.hash_pandas_object(df.astype("string").fillna("<NA>"), index=False).to_numpy())
    df = df.sort_values([*store.POINT_KEY, "timestamp", "run_id", "_h"], kind="stable")
    df = df.drop_duplicates(subset=list(store.POINT_KEY), keep="last").drop(columns="_h")
    df = df.sort_values(SORT, kind="stable").reset_index(drop=True)
    return df, n - len(df)


def merge(sources: Sequence[str | Path], out: str | Path | None = None) -> MergeResult:
    """Read, check and merge `sources`; write the result to `out` (a file, or a folder made a data dir)."""
    target = None
    if out is not None:
        out = Path(out)
        if out.suffix in store.MEASUREMENT_SUFFIXES:
            target = out
        elif out.suffix:
            raise InputError(f"--out {out}: give a .parquet or .csv file, or a folder (made a data dir)")
        else:
            target = out / "measurements" / MERGED_NAME
    frames, read = read_inputs(sources)
    frame, dups = merge_frames(frames)
    result = MergeResult(frame, read, sum(n for _, n in read), dups)
    if out is None or target is None:
        return result
    # every input (calibrations included) is read before anything is created: a bad one leaves no folder behind
    calibrations = newest_calibrations(sources, out / "calibration") if out.suffix == "" else {}
    store.check_writable(target)
    result.calibrations = [store.write_calibration(out / "calibration" / name, doc)
                           for name, doc in sorted(calibrations.items())]
    result.out = store.write_points(target, frame)
    return result


def newest_calibrations(sources: Sequence[str | Path], dest: Path) -> dict[str, dict]:
    """The calibration documents of data-dir inputs and of `dest`, by file name; of one GPU's files the newest."""
    newest: dict[str, dict] = {}
    folders = [Path(s) / "calibration" for s in sources if Path(s).is_dir()] + [dest]
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            doc = store.read_calibration(path)
            name = store.calibration_filename(doc)
            if name not in newest or str(doc["timestamp"]) > str(newest[name]["timestamp"]):
                newest[name] = doc
    return newest

"""Measured rows against the code they measured: per GPU kind, how many rows carry a code fingerprint that differs
from the kernel catalogue's (they measure code that has changed since), and how many carry none (recorded before rows
had one; `workbench stale` resolves those against git, which the analysis side does not read).

Reads the fingerprints published in data/model/kernel-facts.json (models.kernel_catalogue), never `kernels`. Rows of a
kernel the catalogue does not hold (an upload's, the grouped MoE kernels) are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from models.kernel_catalogue import KernelEntry, shipped

DRIFT_COLUMNS = ["gpu_key", "rows", "changed", "unrecorded", "changed_kernels"]


def code_drift(rows: pd.DataFrame, entries: Mapping[str, KernelEntry] | None = None) -> pd.DataFrame:
    """One row per GPU kind of `rows` (measurement rows): DRIFT_COLUMNS, `changed_kernels` the sorted names whose rows
    measure changed code, comma-separated. `entries`: the catalogue (default: the shipped one)."""
    if rows.empty:
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    now = {name: e.fingerprint for name, e in (shipped() if entries is None else entries).items() if e.fingerprint}
    kernel = rows["kernel"].astype(str)
    known = kernel.isin(now)
    recorded = (rows["kernel_fingerprint"].fillna("").astype(str) if "kernel_fingerprint" in rows.columns
                else pd.Series("", index=rows.index))
    frame = pd.DataFrame({"gpu_key": rows["gpu_key"].astype(str), "kernel": kernel, "known": known,
                          "changed": known & (recorded != "") & (recorded != kernel.map(now).fillna("")),
                          "unrecorded": known & (recorded == "")})
    out = []
    for gpu, g in frame.groupby("gpu_key", sort=True):
        kernels = ", ".join(sorted(set(g.loc[g["changed"], "kernel"])))
        out.append({"gpu_key": gpu, "rows": int(g["known"].sum()), "changed": int(g["changed"].sum()),
                    "unrecorded": int(g["unrecorded"].sum()), "changed_kernels": kernels})
    return pd.DataFrame(out, columns=DRIFT_COLUMNS)

"""Which scheme to run at each batch size: the fastest measured and predicted, the margin, the switch points, and a
whole-model plan (the chapter's closing lesson: engines pick W4A16 for small batches, W8A8/FP8 once compute-bound).

Everything is read from a comparison frame (`workbench.analysis.compare.compare_points` over the store) and its helpers:
- `by_batch(comparison, gpu_key, N, K)`: one row per batch M with the fastest scheme measured (its fastest kernel,
  `compare.best_per_scheme`), the runner-up, margin = runner-up time / best time - 1, and `tie` when the two p10/p90
  intervals overlap (best p90 >= runner-up p10: the order is inside the noise, the speedup.py tie rule); the fastest
  scheme predicted (floor tier where the GPU has a calibration, else datasheet, as in
  `workbench.analysis.speedup`) among the same schemes, and whether the two agree.
- `switch_points(table)`: runs of the winner over increasing M, noise-aware: where the previous winner ties the new
  fastest scheme the previous one is kept, so a switch is a batch where another scheme is faster beyond the noise.
  `describe` writes them as "w4a16 up to 64, w8a8 from 128".
- `plan(comparison, model, gpu_key, batches)`: per batch, the fastest scheme of each linear layer (measured where
  that layer's shape was measured, else predicted), the plan's step time (sum of count x layer time), and the best
  single-scheme step beside it (`compare.rollup_measured`).
- Accuracy: `allowed_schemes(errors, bound)` drops schemes whose quantization error (`scheme_errors`, from the
  explorer on chosen weights) exceeds the bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from kernels.quant import quant
from models.errors import InputError
from models.schemes import SCHEME_PARAMS
from workbench.analysis.compare import best_per_scheme, rollup_measured

BY_BATCH_COLUMNS = ("gpu_key", "N", "K", "mode", "M", "best_measured", "kernel", "time_s", "p10_s", "p90_s",
                    "runner_up", "runner_up_time_s", "margin", "tie", "best_predicted", "time_predicted_s",
                    "predicted_tier", "agree")
DEFAULT_EXCLUDE = ("fp32",)  # never a candidate for a decode layer; name it in `schemes` to include it


def _w4_choice() -> quant.Choice:
    p = SCHEME_PARAMS["w4a16"]
    return quant.Choice("int4", "group", p["group_size"], False, p["zero"], p["scale_dtype"])


# The weight quantization each runnable scheme's kernels apply (the measured fp8 kernels use per-channel scales).
SCHEME_CHOICES: dict[str, quant.Choice] = {
    "w4a16": _w4_choice(),
    "w8a16": quant.Choice("int8", "channel", scale_dtype=SCHEME_PARAMS["w8a16"]["scale_dtype"]),
    "w8a8": quant.Choice("int8", "channel", scale_dtype="fp16"),
    "fp8": quant.Choice("fp8", "channel", scale_dtype=SCHEME_PARAMS["fp8"]["scale_dtype"]),
}


def scheme_errors(w: np.ndarray, schemes: Iterable[str], tokens: int = 16, seed: int = 0) -> dict[str, float]:
    """Output error rel ||x W_q^T - x W^T|| / ||x W^T|| of each scheme's weight quantization on `w` (activation
    quantization of w8a8/fp8 not included); 16-bit schemes by their rounding, fp32 exact."""
    from kernels import reference
    from workbench.analysis.quant_error import error_of

    w = np.asarray(w, dtype=np.float64)
    x = np.random.default_rng(seed + 1).standard_normal((tokens, w.shape[1]))
    y = reference.matmul_t(x, w)
    out = {}
    for s in schemes:
        if s in SCHEME_CHOICES:
            out[s] = error_of(w, SCHEME_CHOICES[s], tokens, seed)
        elif s in ("fp16", "bf16"):
            wr = w.astype(np.float16).astype(np.float64) if s == "fp16" else quant.round_bf16(w)
            out[s] = reference.rel_error(reference.matmul_t(x, wr), y)
        else:
            out[s] = 0.0
    return out


def allowed_schemes(errors: Mapping[str, float], bound: float) -> list[str]:
    if not (np.isfinite(bound) and bound > 0):
        raise InputError(f"the error bound must be a positive fraction (e.g. 0.05), got {bound}")
    return [s for s, e in errors.items() if e <= bound]


def _candidates(comparison: pd.DataFrame, schemes: Iterable[str] | None) -> list[str]:
    present = sorted(set(comparison["scheme"].astype(str)))
    if schemes is None:
        return [s for s in present if s not in DEFAULT_EXCLUDE]
    wanted = list(dict.fromkeys(schemes))
    if not wanted:
        raise InputError("no scheme is left to choose from (the accuracy bound excludes them all?)")
    return wanted


def _pred_time(rows: pd.DataFrame) -> tuple[np.ndarray, str]:
    """The kernel-aware tier where every row has it (it predicts real kernels), else floor, else datasheet."""
    if "time_kernel_s" in rows:
        kernel = rows["time_kernel_s"].to_numpy(dtype="float64")
        if np.isfinite(kernel).all():
            return kernel, "kernel"
    floor = rows["time_floor_s"].to_numpy(dtype="float64")
    if np.isfinite(floor).all():
        return floor, "floor"
    return rows["time_datasheet_s"].to_numpy(dtype="float64"), "datasheet"


def by_batch(comparison: pd.DataFrame, gpu_key: str, N: int, K: int, *, schemes: Iterable[str] | None = None,
             mode: str = "cold") -> pd.DataFrame:
    """The per-batch recommendation table (BY_BATCH_COLUMNS) of one GPU and shape."""
    df = comparison[(comparison["gpu_key"] == gpu_key) & (comparison["N"] == N) & (comparison["K"] == K)
                    & (comparison["mode"] == mode)]
    if df.empty:
        mine = comparison[(comparison["gpu_key"] == gpu_key) & (comparison["mode"] == mode)]
        raise InputError(f"no {mode} measurements of {N}x{K} on {gpu_key}; measured shapes: "
                         + (", ".join(f"{n}x{k}" for n, k in sorted(set(zip(mine["N"], mine["K"], strict=True))))
                            or "none"))
    best = best_per_scheme(df, _candidates(df, schemes))
    if best.empty:  # schemes asked for that this GPU never measured at this shape
        raise InputError(f"no {mode} measurements of {', '.join(schemes or [])} at {N}x{K} on {gpu_key}; measured "
                         f"schemes: {', '.join(sorted(set(df['scheme'].astype(str))))}")
    rows = []
    for m, g in best.groupby("M", sort=True):
        g = g.sort_values(["time_measured_s", "scheme"], kind="stable")
        first = g.iloc[0]
        second = g.iloc[1] if len(g) > 1 else None
        pt, tier = _pred_time(g)
        p = g.iloc[int(np.nanargmin(pt))] if np.isfinite(pt).any() else None
        p90 = first["time_p90_s"] if np.isfinite(first["time_p90_s"]) else first["time_measured_s"]
        r_p10 = (second["time_p10_s"] if second is not None and np.isfinite(second["time_p10_s"])
                 else (second["time_measured_s"] if second is not None else np.nan))
        rows.append(dict(
            gpu_key=gpu_key, N=N, K=K, mode=mode, M=int(m), best_measured=first["scheme"], kernel=first["kernel"],
            time_s=float(first["time_measured_s"]), p10_s=float(first["time_p10_s"]), p90_s=float(first["time_p90_s"]),
            runner_up=second["scheme"] if second is not None else "",
            runner_up_time_s=float(second["time_measured_s"]) if second is not None else np.nan,
            margin=float(second["time_measured_s"] / first["time_measured_s"] - 1) if second is not None else np.nan,
            tie=bool(second is not None and p90 >= r_p10),
            best_predicted=p["scheme"] if p is not None else "",
            time_predicted_s=float(np.nanmin(pt)) if p is not None else np.nan, predicted_tier=tier,
            agree=bool(p is not None and p["scheme"] == first["scheme"])))
    return pd.DataFrame(rows, columns=list(BY_BATCH_COLUMNS))


def winners(table: pd.DataFrame, column: str = "best_measured", noise_aware: bool = True) -> list[str]:
    """The winner per row (increasing M); noise-aware: keep the previous winner while it ties the fastest scheme."""
    out: list[str] = []
    for _, r in table.sort_values("M").iterrows():
        w = r[column]
        if noise_aware and out and out[-1] != w and bool(r["tie"]) and r["runner_up"] == out[-1]:
            w = out[-1]
        out.append(w)
    return out


def switch_points(table: pd.DataFrame, column: str = "best_measured", noise_aware: bool = True) -> list[dict]:
    """Runs of one winner: [{"scheme", "from", "to"}] over the table's batches in increasing order."""
    ms = sorted(int(m) for m in table["M"])
    runs: list[dict[str, Any]] = []
    for m, w in zip(ms, winners(table, column, noise_aware), strict=True):
        if runs and runs[-1]["scheme"] == w:
            runs[-1]["to"] = m
        else:
            runs.append({"scheme": w, "from": m, "to": m})
    return runs


def switch_batch(table: pd.DataFrame, column: str = "best_measured") -> float:
    """The first batch where the (noise-aware) winner changes; NaN when one scheme wins every batch."""
    runs = switch_points(table, column)
    return float(runs[1]["from"]) if len(runs) > 1 else float("nan")


def describe(runs: list[dict]) -> str:
    """"w4a16 up to 64, fp8 from 128" (a middle run: "w8a8 from 8 to 32")."""
    if not runs:
        return "no measurements"
    if len(runs) == 1:
        return f"{runs[0]['scheme']} at every batch ({runs[0]['from']}-{runs[0]['to']})"
    parts = [f"{runs[0]['scheme']} up to {runs[0]['to']}"]
    for r in runs[1:-1]:
        parts.append(f"{r['scheme']} from {r['from']} to {r['to']}" if r["to"] != r["from"]
                     else f"{r['scheme']} at {r['from']}")
    parts.append(f"{runs[-1]['scheme']} from {runs[-1]['from']}")
    return ", ".join(parts)


PLAN_COLUMNS = ("model", "gpu_key", "M", "time_step_s", "tokens_per_s", "layers", "n_predicted_layers",
                "best_single_scheme", "time_step_single_s", "gain_over_single")


def plan(comparison: pd.DataFrame, model: str, gpu_key: str, *, batches: Iterable[int] | None = None,
         schemes: Iterable[str] | None = None, mode: str = "cold",
         calibrations: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """A scheme per layer and batch (the fastest measured at the layer's shape, else the fastest predicted by
    models.rollup's per-layer points) and the step time Σ count × layer time, beside the best single scheme's
    measured step (`compare.rollup_measured`)."""
    from models.rollup import model_points
    from models.roofline import predict
    from models.workloads import get_model

    m = get_model(model)
    df = comparison[(comparison["gpu_key"] == gpu_key) & (comparison["mode"] == mode)]
    cands = _candidates(df if len(df) else comparison, schemes)
    best = best_per_scheme(df, cands)
    ms = sorted({int(b) for b in batches}) if batches is not None else sorted(set(best["M"].astype(int)))
    if not ms:
        raise InputError(f"no {mode} measurements on {gpu_key} and no --batch given")
    pred = predict(model_points(m, [gpu_key], cands, ms), calibrations)
    tcol = "time_floor_s" if np.isfinite(pred["time_floor_s"]).all() else "time_datasheet_s"
    single = rollup_measured(comparison, model, gpu_key=gpu_key, schemes=cands, batches=ms,
                             calibrations=calibrations, mode=mode)
    rows = []
    for M in ms:
        total, parts, n_pred = 0.0, [], 0
        for layer in m.layers:
            meas = best[(best["M"] == M) & (best["N"] == layer.N) & (best["K"] == layer.K)]
            if layer.experts <= 1 and not meas.empty:
                r = meas.sort_values("time_measured_s", kind="stable").iloc[0]
                total += layer.count * float(r["time_measured_s"])
                parts.append(f"{layer.name}={r['scheme']}")
                continue
            p = pred[(pred["batch"] == M) & (pred["layer"] == layer.name)].sort_values(tcol, kind="stable")
            total += float(p["instances"].iloc[0] * p[tcol].iloc[0])
            parts.append(f"{layer.name}={p['scheme'].iloc[0]}(predicted)")
            n_pred += 1
        s = single[(single["M"] == M) & np.isfinite(single["time_step_measured_s"])]
        s = s.sort_values("time_step_measured_s").iloc[0] if len(s) else None
        rows.append(dict(model=m.key, gpu_key=gpu_key, M=M, time_step_s=total, tokens_per_s=M / total,
                         layers=";".join(parts), n_predicted_layers=n_pred,
                         best_single_scheme=s["scheme"] if s is not None else "",
                         time_step_single_s=float(s["time_step_measured_s"]) if s is not None else np.nan,
                         gain_over_single=float(s["time_step_measured_s"] / total) if s is not None else np.nan))
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))

"""The parallelism rules tried for the kernel tier (docs/model.md, "Parallelism"), each refitted and checked the way
`workbench model-fit` and `workbench model-check` do: H200 leave-one-shape-out and the H100 held out of every fit.

    PYTHONPATH=. python3 bench/parallelism_variants.py [VARIANT ...]      (default: all; no GPU needed)

A variant multiplies some of the kernel tier's raw terms (models.kernel_model.raw_terms, with the shipped rule
`idle_stretch` switched off) by a factor from the kernel's grid (models.parallelism):
  load   sm_load: ceil(C / S) x S / C (persistent grids: slots / C), every kernel that declares a grid
  idle   S / C where C < S, tensor-core GEMVs only (the shipped rule)
  wave   idle x the waves of C CTAs over S x the launch bounds' minimum CTAs per SM (the launcher's `minb`)
applied to the terms named: alu (conversion and CUDA-core rows), tc (tensor), mem (reads); `gemv` restricts any
factor to GEMV-class kernels, `tc_persistent` puts the tensor factor on the persistent grids only.
Prints median / p90 of |predicted / measured - 1| (%) over the fastest kernel per scheme, shape and M.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

Factor = Callable[..., np.ndarray]
# name -> (factor rule, terms it multiplies, GEMV-class kernels only)
VARIANTS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "none": ("idle", (), False),
    "load: alu": ("load", ("alu",), False),
    "load: alu, GEMVs": ("load", ("alu",), True),
    "load: alu, tc": ("load", ("alu", "tc"), False),
    "load: alu, tc, GEMVs": ("load", ("alu", "tc"), True),
    "load: alu; tc on persistent grids": ("load", ("alu", "tc_persistent"), False),
    "load: alu, tc, mem": ("load", ("alu", "tc", "mem"), False),
    "load: alu, tc, mem, GEMVs": ("load", ("alu", "tc", "mem"), True),
    "idle: alu, GEMVs": ("idle", ("alu",), True),
    "idle: alu, tc, GEMVs (shipped)": ("idle", ("alu", "tc"), True),
    "wave: alu, tc, GEMVs": ("wave", ("alu", "tc"), True),
}


@functools.cache
def _minb(dequant: str, path: str, M: int, N: int, sms: int) -> int:
    from kernels.tcgemv import tc_gemv, tc_gemv_f16, tc_gemv_q8, tc_gemv_w8a16

    choose = {"w4": tc_gemv.choose_config, "w8": tc_gemv_w8a16.choose_config, "e4m3": tc_gemv_q8.choose_config}.get(
        dequant, tc_gemv_q8.choose_config if path == "mma_sync_s8" else tc_gemv_f16.choose_config)
    return choose(M, N, sms).minb


def factor(rule: str, facts, gpu, M: np.ndarray, N: np.ndarray) -> np.ndarray:
    from models.parallelism import declares_grid, grid_ctas, sm_load

    if rule == "load":
        return sm_load(facts, M, N, gpu.sms, gpu.resident_clusters)
    tc_gemv = facts.family == "gemv" and not facts.stream_k_ctas and declares_grid(facts)
    if not tc_gemv:
        return np.ones(M.shape)
    ctas = grid_ctas(facts, M, N, gpu.sms)
    idle = np.maximum(gpu.sms / np.maximum(ctas, 1.0), 1.0)
    if rule == "idle":
        return idle
    mm, nn = np.broadcast_arrays(M, N)
    minb = np.array([_minb(facts.dequant, facts.path, int(m), int(n), gpu.sms) for m, n in zip(mm.ravel(), nn.ravel(),
                                                                                            strict=True)])
    slots = gpu.sms * minb.reshape(mm.shape)
    return idle * np.where(ctas > slots, np.ceil(ctas / slots) * slots / ctas, 1.0)


def patched(variant: str) -> Callable[..., object]:
    import models.kernel_model as km

    rule, terms, gemv_only = VARIANTS[variant]
    plain = km.raw_terms

    def raw(facts, gpu, M, N, K, nbytes):
        t = plain(facts, gpu, M, N, K, nbytes)
        M_, N_ = np.asarray(M, dtype=np.float64), np.asarray(N, dtype=np.float64)
        f = factor(rule, facts, gpu, M_, N_) if terms and not (gemv_only and facts.family != "gemv") else 1.0
        persistent = f if facts.stream_k_ctas else 1.0
        return km.Terms(t.fixed, t.memory * (f if "mem" in terms else 1.0),
                        t.dequant * (f if "alu" in terms else 1.0), t.rows * (f if "alu" in terms else 1.0),
                        t.tensor * (f if "tc" in terms else persistent if "tc_persistent" in terms else 1.0),
                        t.fixup)

    return raw


def run(variant: str, data: Path) -> dict[str, tuple[float, float]]:
    import models.kernel_fit as kf
    import models.kernel_model as km
    from workbench.analysis.kernel_tier import fit_rows, gpu_lookup, kernel_facts
    from workbench.analysis.model_check import calibrated_rows, check
    from workbench.interfaces.cli_model import _load

    shipped = km.raw_terms, km.idle_stretch
    km.idle_stretch = lambda facts, M, N, sms: np.ones(np.shape(np.asarray(M, dtype=np.float64)))
    km.raw_terms = kf.raw_terms = patched(variant)
    try:
        measured, cals = _load(data)
        table = kf.fit_table(fit_rows(calibrated_rows(measured, cals)[0]), kernel_facts(), gpu_lookup(cals))
        s = check(measured, cals, None, table).summary
    finally:
        km.raw_terms = kf.raw_terms = shipped[0]
        km.idle_stretch = shipped[1]
    s = s[(s["tier"] == "kernel") & (s["group"] == "all")]
    return {v: (float(g["median_abs"].iloc[0]), float(g["p90_abs"].iloc[0])) for v, g in s.groupby("view")}


def main() -> None:
    names = sys.argv[1:] or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}")
    data = Path(__file__).resolve().parents[1] / "data"
    print(f"{'variant':38s} {'H200 LOSO':>14s} {'H100 held out':>14s}")
    for name in names:
        got = run(name, data)
        cells = [f"{got[v][0]:6.2%} / {got[v][1]:6.2%}" if v in got else "" for v in ("LOSO", "GPU held out")]
        print(f"{name:38s} {cells[0]:>14s} {cells[1]:>14s}", flush=True)


if __name__ == "__main__":
    main()

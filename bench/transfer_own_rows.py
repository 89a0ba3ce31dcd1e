"""Our own H100 measurements as a transfer source (docs/transfer.md, "The A100's bandwidth"): would a second HBM GPU
in the transfer fit bring the A100's leave-one-GPU-out error down?

The profiler's cuBLAS bf16 / fp16 rows on the H100 (L2-cold, unthrottled; `data/measurements/h100-sxm/`) join the
public A100 and L40S rows as anchors of `models.transfer_fit.fit_factors`, so HBM3 gets a read fraction fitted on
them; then every GPU is left out in turn (`leave_one_gpu_out`). Prints the factors and, per GPU and scheme, the signed
median, median and p90 of |predicted / measured - 1|. No GPU needed; nothing is written.

    PYTHONPATH=. python3 bench/transfer_own_rows.py [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ANCHORS = ("cublas_bf16", "cublas_fp16")


def own_rows(measured, gpu: str):
    """The GPU's anchor-kernel rows a fit may use (L2-cold, unthrottled, checked) as transfer-fit rows with bytes."""
    import numpy as np
    import pandas as pd

    from models.transfer_fit import with_bytes
    from workbench.analysis.kernel_tier import fit_rows

    m = fit_rows(measured[(measured["gpu_key"].astype(str) == gpu) & measured["kernel"].astype(str).isin(ANCHORS)])
    rows = pd.DataFrame({"gpu": gpu, "scheme": m["scheme"].astype(str), "kernel": m["kernel"].astype(str),
                         "group_size": np.nan, "N": m["N"].astype(int), "K": m["K"].astype(int),
                         "M": m["M"].astype(int), "time_s": m["time_median_s"].astype(float)})
    return with_bytes(rows.reset_index(drop=True))


def main() -> None:
    import pandas as pd

    from models.hardware import load_calibrations
    from models.library_kernels import LIBRARY
    from models.transfer_fit import fit_factors, leave_one_gpu_out
    from workbench.analysis.gpu_check import public_points, summarize
    from workbench.analysis.kernel_tier import kernel_facts, params_for
    from workbench.storage.public import load_public
    from workbench.storage.store import load_measurements

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[1] / "data")
    ap.add_argument("--gpu", default="h100-sxm", help="the measured, uncalibrated GPU whose rows join the fit")
    ap.add_argument("--reference", default="h200-sxm")
    args = ap.parse_args()
    root = args.data_dir
    cal = load_calibrations(root)[args.reference]
    own = own_rows(load_measurements(root), args.gpu)
    rows = pd.concat([public_points(load_public(root)), own], ignore_index=True)
    facts, table, library = kernel_facts(), params_for(root), set(LIBRARY)
    fitted = fit_factors(rows, args.reference, cal, facts, table, library)
    print(f"{len(own)} rows of {args.gpu} ({', '.join(ANCHORS)}) beside {len(rows) - len(own)} public points")
    for kind, got in (("read fraction", fitted.read_fraction), ("tensor fraction", fitted.tensor_fraction)):
        for key, f in sorted(got.items()):
            print(f"{kind:15s} {key:6s} {f.value:.3f}  {', '.join(f.gpus)} ({f.points} points)")
    pred = leave_one_gpu_out(rows, args.reference, cal, facts, table, library)
    s = summarize(rows.assign(view="leave one GPU out", time_pred_s=pred))
    s = s[s["n"] > 0][["gpu", "scheme", "n", "signed_median", "median_abs", "p90_abs"]]
    for c, form in (("signed_median", "{:+.1%}"), ("median_abs", "{:.1%}"), ("p90_abs", "{:.1%}")):
        s[c] = s[c].map(form.format)
    print(s.to_string(index=False))


if __name__ == "__main__":
    main()

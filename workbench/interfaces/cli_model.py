"""`workbench model-fit` and `workbench model-check`: estimate the kernel tier's parameters, and say how well every
tier predicts the measurements (in sample, leave one shape out, and on held-out measurement files).
`workbench kernel-facts`: publish the kernel registry's facts to data/model/kernel-facts.json, which the analysis
side reads instead of importing the registry (`--check` says whether the file is current).

Exit codes: 0 ok, 2 bad input. The thresholds a regression must not cross live in the hypotheses TOML
(`kind = "model_error"`), which `workbench validate` checks.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from models.errors import InputError
from workbench.interfaces import cli_args


def _load(data_dir: Path, files: list[Path] | None = None):
    from models.hardware import load_calibrations
    from workbench.storage.store import load_measurements

    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: no such data directory; give --data-dir DIR holding measurements/")
    cals = load_calibrations(data_dir)
    measured = load_measurements(files if files else data_dir)
    if measured.empty:
        raise InputError(f"no measurements under {files or data_dir}")
    return measured, cals


def _fmt_summary(summary) -> str:
    t = summary.copy()
    for c in ("median_abs", "p90_abs", "within_10pct", "mean_signed"):
        form = "{:+.1%}" if c == "mean_signed" else "{:.1%}"
        t[c] = t[c].map(lambda v, form=form: "" if v != v else form.format(v))
    return t.to_string(index=False)


def _public(root: Path):
    from workbench.storage.public import load_public

    pub = load_public(root)
    if pub.empty:
        raise InputError(f"no public timings under {root}/public; import some with `workbench import FILE "
                         f"--data-dir {root}`")
    return pub


def fit_transfer(root: Path, reference: str, out: Path | None) -> None:
    """`model-fit --transfer`: the transfer factors and the library kernels' parameters from the public timings
    under `root`, anchored on the calibrated `reference` GPU; written atomically to `out`."""
    from models.hardware import get_gpu, load_calibrations
    from models.library_kernels import LIBRARY
    from models.transfer import FACTORS_FILE
    from models.transfer_fit import fit_factors
    from workbench.analysis.gpu_check import public_points
    from workbench.analysis.kernel_tier import kernel_facts, params_for
    from workbench.storage.store import atomic_write_bytes

    ref = get_gpu(reference).key
    cals = load_calibrations(root)
    cal = cals.get(ref)
    if cal is None:
        raise InputError(f"no calibration of the reference GPU {ref} under {root}/calibration; run `workbench "
                         "calibrate` on it or give --reference a calibrated GPU")
    target = out or root / FACTORS_FILE
    if target.suffix != ".json":
        raise InputError(f"--out {target}: give a .json file")
    cli_args.writable_target(target, "--out" if out else "--data-dir")
    pub = _public(root)
    factors = fit_factors(public_points(pub), ref, cal, kernel_facts(), params_for(root), set(LIBRARY), cals)
    factors.provenance.update({"public_files": sorted(set(pub["imported_from"].astype(str).map(
        lambda f: Path(f).name))) if "imported_from" in pub else [], "data_dir": str(root),
        "reference_calibration": Path(cal.path).name})
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, factors.to_json().encode())
    for kind, table in (("read fraction", factors.read_fraction), ("tensor fraction", factors.tensor_fraction)):
        for key, f in sorted(table.items()):
            fit = "" if not f.points else (f"  {f.points} rows, residual median {f.residual_median:+.1%}, p90 "
                                           f"{f.residual_p90:.1%}")
            print(f"{kind:15s} {key:7s} {f.value:.3f}  {f.how}{fit}")
    print(f"wrote the transfer factors and {len(factors.kernels)} library kernels' parameters to {target}",
          file=sys.stderr)


def check_by_gpu(root: Path, csv: Path | None, as_json: bool) -> None:
    """`model-check --by-gpu`: per GPU and scheme, time and speedup error in and out of sample (gpu_check)."""
    from workbench.analysis.gpu_check import by_gpu
    from workbench.analysis.kernel_tier import factors_for, kernel_facts, params_for
    from workbench.analysis.model_check import check
    from workbench.interfaces.cli_args import write_csv

    factors = factors_for(root)
    if factors is None:
        raise InputError(f"no transfer factors in {root}/model or shipped; run `workbench model-fit --transfer`")
    measured, cals = _load(root)
    if factors.reference_gpu not in cals:
        raise InputError(f"no calibration of the reference GPU {factors.reference_gpu} under {root}/calibration")
    table = params_for(root)
    result = by_gpu(_public(root), check(measured, cals, None, table).points, factors.reference_gpu,
                    cals[factors.reference_gpu], kernel_facts(), table, factors, cals)
    if as_json:
        print(json.dumps(result.summary.to_dict(orient="records"), indent=1))
    else:
        print("Per GPU and scheme: time |predicted / measured - 1| and speedup over bf16 |predicted / measured - 1|")
        print(_fmt_by_gpu(result.summary))
    if csv is not None:
        write_csv(result.points, csv)


def _fmt_by_gpu(summary) -> str:
    t = summary.copy()
    for c in ("signed_median", "median_abs", "p90_abs", "speedup_signed_median", "speedup_median_abs",
              "speedup_p90_abs"):
        form = "{:+.1%}" if "signed" in c else "{:.1%}"
        t[c] = t[c].map(lambda v, form=form: "" if v != v else form.format(v))
    t.columns = ["view", "gpu", "scheme", "n", "signed", "|err|", "p90", "speedup n", "speedup signed",
                 "speedup |err|", "speedup p90"]
    return t.to_string(index=False)


def register(app: typer.Typer) -> None:
    @app.command("model-fit")
    def model_fit(
        data_dir: cli_args.DataDirOpt = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="parameter JSON to write")] = None,  # type: ignore
        measurements: Annotated[list[Path], typer.Option("--measurements", help="fit on these measurement files "
                                                         "only (default: all under the data directory)")] = None,  # type: ignore
        transfer: Annotated[bool, typer.Option("--transfer", help="fit the transfer factors (GPUs never "
                                               "calibrated) and the library kernels' parameters on the public "
                                               "timings under DIR/public instead (model/transfer-factors.json)")]
        = False,
        reference: Annotated[str, typer.Option("--reference", help="with --transfer: the calibrated GPU the "
                                               "transfer is anchored on")] = "h200-sxm",
    ) -> None:
        """Estimate the kernel tier's parameters per kernel from L2-cold, unthrottled timings of calibrated GPUs."""
        from models.kernel_fit import fit_table, param_frame
        from workbench.analysis.kernel_tier import fit_rows, gpu_lookup, kernel_facts, params_path
        from workbench.storage.store import atomic_write_bytes

        root = cli_args.dataset(data_dir)
        if transfer:
            if measurements:
                raise InputError("--measurements does not apply to --transfer (it fits on DIR/public)")
            fit_transfer(root, reference, out)
            return
        target = out or params_path(root)
        if target.suffix != ".json":
            raise InputError(f"--out {target}: give a .json file")
        cli_args.writable_target(target, "--out" if out else "--data-dir")
        cli_args.check_out_path(target, "--out" if out else "--data-dir")  # before the fit, creating nothing
        for m in measurements or []:
            if not m.is_file():
                raise InputError(f"--measurements {m}: no such file")
        measured, cals = _load(root, list(measurements) if measurements else None)
        from workbench.analysis.model_check import calibrated_rows

        measured, held = calibrated_rows(measured, cals)
        if measured.empty:
            raise InputError(f"no measurements of a calibrated GPU under {root} (calibrated: "
                             f"{', '.join(sorted(cals)) or 'none'}); run `workbench calibrate` on the GPU measured")
        rows = fit_rows(measured)
        from workbench.measure.stale import row_status
        from workbench.storage.store import measurement_files

        changed = rows.loc[(row_status(rows) == "changed").to_numpy(), "kernel"].value_counts().sort_index()

        files = [f.name for f in measurement_files(list(measurements) if measurements else root)]
        prov = {"fitted": datetime.now(UTC).isoformat(timespec="seconds"), "data_dir": str(root),
                "gpus": sorted(set(rows["gpu"])), "git_commits": sorted(set(rows["git_commit"].astype(str))),
                "files": files, "rows": "L2-cold, unthrottled, float64 check passed",
                "changed_code_rows": {str(k): int(n) for k, n in changed.items()}}
        table = fit_table(rows, kernel_facts(), gpu_lookup(cals), prov)
        from workbench.analysis import moe_tier  # the grouped MoE kernels, from the rows of `profile --moe`

        table = moe_tier.params_table(moe_tier.fit(moe_tier.measured_rows(measured), cals), table)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, table.to_json().encode())
        frame = param_frame(table)
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        if len(held):  # said once the file is written: an error must stay the only line on stderr
            gpus = ", ".join(sorted(set(held["gpu_key"].astype(str))))
            print(f"left out {len(held)} rows of GPUs with no calibration ({gpus}): their terms are transferred, "
                  "so they check the model (`model-check`) instead of fitting it",
                  file=sys.stderr)
        if len(changed):
            print(f"fitted on {int(changed.sum())} rows of kernels whose code changed since they were measured "
                  f"({', '.join(map(str, changed.index))}; `workbench stale` lists them): measure them again with "
                  "`workbench profile --stale --out FILE`", file=sys.stderr)
        print(f"wrote {len(table.kernels)} kernels' parameters to {target}", file=sys.stderr)

    @app.command("kernel-facts")
    def kernel_facts_cmd(
        out: Annotated[Path, typer.Option("--out", "-o", help="JSON to write (default: the shipped "
                                          "data/model/kernel-facts.json)")] = None,  # type: ignore[assignment]
        check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 when the file differs from the "
                                            "registry")] = False,
    ) -> None:
        """Write the kernel registry's facts (scheme, batch range, tiles, instruction path) and each kernel's code
        fingerprint for the analysis side."""
        from kernels.fingerprint import catalogue
        from models.kernel_catalogue import catalogue_path, to_json
        from workbench.storage.store import atomic_write_bytes

        target = out or catalogue_path()
        if target.suffix != ".json":
            raise InputError(f"--out {target}: give a .json file")
        if not check:  # an installed catalogue is read-only: write it in a checkout, or give --out
            cli_args.writable_target(target, "--out" if out else "kernel-facts: the shipped catalogue")
        entries = catalogue()
        text = to_json(entries)
        if check:
            current = target.read_text() if target.is_file() else None
            if current != text:
                print(f"{target} differs from the kernel registry ({len(entries)} kernels): run `workbench "
                      "kernel-facts` and commit it", file=sys.stderr)
                raise typer.Exit(1)
            print(f"{target} matches the kernel registry ({len(entries)} kernels)", file=sys.stderr)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, text.encode())
        print(f"wrote {len(entries)} kernels' facts to {target}", file=sys.stderr)

    @app.command("model-check")
    def model_check(
        data_dir: cli_args.DataDirOpt = None,
        holdout: Annotated[list[Path], typer.Option("--holdout", help="measurement file(s) the parameters never "
                                                    "saw, checked with the shipped parameters")] = None,  # type: ignore
        csv: Annotated[Path, typer.Option("--csv", help="also write the per-point table (SI units)")] = None,  # type: ignore
        as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
        by_gpu: Annotated[bool, typer.Option("--by-gpu", help="per GPU and scheme, with the public timings under "
                                             "DIR/public: time and speedup error in sample and leave one GPU "
                                             "out")] = False,
    ) -> None:
        """Model error per tier, scheme and batch range: in sample, leave-one-shape-out and on held-out files."""
        from workbench.analysis.kernel_tier import params_for
        from workbench.analysis.model_check import check, crossovers
        from workbench.interfaces.cli_args import write_csv

        root = cli_args.dataset(data_dir)
        if csv is not None and csv.suffix != ".csv":
            raise InputError(f"--csv {csv}: give a .csv file")
        if by_gpu:
            if holdout:
                raise InputError("--holdout does not apply to --by-gpu (every GPU is held out in turn)")
            check_by_gpu(root, csv, as_json)
            return
        for h in holdout or []:
            if not h.exists():
                raise InputError(f"--holdout {h}: no such file")
        measured, cals = _load(root)
        held = _load(root, list(holdout))[0] if holdout else None
        result = check(measured, cals, held, params_for(root))
        if as_json:
            print(json.dumps(result.summary.to_dict(orient="records"), indent=1))
        else:
            print("Fastest unthrottled kernel per (scheme, shape, M), L2-cold: |predicted / measured - 1|")
            print(_fmt_summary(result.summary))
            sp = result.speedups
            if len(sp):
                print("\nW4A16 / BF16 speedup, kernel tier against measured (fastest unthrottled kernel of each):")
                piv = sp.assign(cell=sp["speedup_predicted"].map("{:.2f}".format) + " / "
                                + sp["speedup_measured"].map("{:.2f}".format) + sp["best_throttled"].map({True: "*",
                                                                                                          False: ""}))
                print(piv.pivot_table(index=["view", "gpu", "N", "K"], columns="M", values="cell", aggfunc="first")
                      .to_string())
                if sp["best_throttled"].any():
                    print("* the fastest kernel of a scheme ran throttled there: the unthrottled next one stands")
                print("\nCrossover batch (first M with speedup <= 1; steps apart in the batch list):")
                print(crossovers(sp).to_string(index=False))
        if csv is not None:
            write_csv(result.points, csv)

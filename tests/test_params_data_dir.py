"""The kernel tier reads the parameters of the data directory it is given (`workbench model-fit --data-dir DIR`
writes DIR/model/kernel-params.json): comparison (export/validate), model-check and the dashboard's data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from models.errors import InputError
from models.paths import checkout_data_dir as shipped_dir
from workbench.analysis.kernel_tier import params_for, params_path
from workbench.interfaces.cli_compare import load_comparison

EXTRA = 10e-6  # seconds added to one kernel's fixed cost in the data directory's own parameter file


def _data_dir(tmp_path: Path) -> Path:
    """A data directory with 4 shipped w4a16_gemv points and the shipped calibration."""
    root = tmp_path / "data"
    rows = pd.read_parquet(shipped_dir() / "measurements" / "h200-sxm" / "sweep-cold.parquet")
    rows = rows[(rows["kernel"] == "w4a16_gemv") & (rows["N"] == 22016)].head(4)
    assert len(rows) == 4
    (root / "measurements" / "h200-sxm").mkdir(parents=True)
    rows.to_parquet(root / "measurements" / "h200-sxm" / "few.parquet", index=False)
    shutil.copytree(shipped_dir() / "calibration", root / "calibration")
    return root


def test_a_data_directory_without_parameters_uses_the_shipped_ones(tmp_path):
    assert params_for(None) == params_for(tmp_path)  # no model/kernel-params.json there
    shipped = json.loads(params_path().read_text())["kernels"]["w4a16_gemv"]
    assert params_for(tmp_path).kernels["w4a16_gemv"].extra_fixed_s == shipped["extra_fixed_s"]


def test_comparison_uses_the_data_directorys_own_parameters(tmp_path):
    root = _data_dir(tmp_path)
    before = load_comparison(root)[0].sort_values("M")["time_kernel_s"].to_numpy()
    doc = json.loads(params_path().read_text())
    doc["kernels"]["w4a16_gemv"]["extra_fixed_s"] += EXTRA  # combine(): time = fixed + extra_fixed + ... (linear)
    (root / "model").mkdir()
    (root / "model" / "kernel-params.json").write_text(json.dumps(doc))
    after = load_comparison(root)[0].sort_values("M")["time_kernel_s"].to_numpy()
    assert after - before == pytest.approx([EXTRA] * 4, rel=1e-9, abs=1e-12)


def test_a_broken_parameter_file_in_the_data_directory_is_refused_in_one_line(tmp_path):
    root = _data_dir(tmp_path)
    (root / "model").mkdir()
    (root / "model" / "kernel-params.json").write_text("{not json")
    with pytest.raises(InputError, match="kernel-params.json: not a readable kernel-parameter JSON"):
        load_comparison(root)

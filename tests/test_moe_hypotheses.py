"""moe_speedup hypotheses (issue 33 item 6): predicted on any GPU, measured from the dataset's MoE rows, and bad
input as one line naming the field, exit 2, nothing written (item 7)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from models.errors import InputError
from workbench.analysis.hypotheses import evaluate_all, parse_text
from workbench.interfaces.cli import main

BASE = """[[hypothesis]]
id = "h"
kind = "moe_speedup"
model = "{model}"
a = "{a}"
b = "bf16"
batch = {batch}
op = ">="
value = {value}
{extra}
"""


def hyp(model="mixtral-8x7b", a="w4a16", batch="64", value=1.5, extra=""):
    return BASE.format(model=model, a=a, batch=batch, value=value, extra=extra)


def _rows(bf16_us: float, w4_us: float) -> pd.DataFrame:
    rows = []
    for layer in ("expert_gate_up", "expert_down"):
        for kernel, t in (("grouped_bf16_tc", bf16_us), ("grouped_w4a16_tc", w4_us)):
            rows.append({"gpu": "h200-sxm", "model": "mixtral-8x7b", "layer": layer, "kernel": kernel, "batch": 64,
                         "routing": "uniform", "time_s": t * 1e-6})
    return pd.DataFrame(rows)


def test_predicted_on_any_gpu_and_measured_from_moe_rows():
    from workbench.analysis.compare import empty_comparison

    hs = parse_text(hyp(extra='gpu = ["h200-sxm", "h100-sxm"]'))
    got = evaluate_all(hs, empty_comparison(), moe_rows=_rows(440.0, 250.0))
    pred = got[got["source"] == "predicted"]
    assert set(pred["gpu_key"]) == {"h200-sxm", "h100-sxm"} and (pred["value"] > 1.0).all()
    meas = got[got["source"] == "measured"].set_index("gpu_key")
    assert meas.loc["h200-sxm", "verdict"] == "pass" and meas.loc["h200-sxm", "value"] == pytest.approx(1.76)
    assert meas.loc["h100-sxm", "verdict"] == "inconclusive"
    slow = evaluate_all(parse_text(hyp(extra='gpu = "h200-sxm"')), empty_comparison(), moe_rows=_rows(440, 400))
    assert slow.set_index("source").loc["measured", "verdict"] == "fail"
    other = evaluate_all(parse_text(hyp(extra='routing = "zipf:1"\ngpu = "h200-sxm"')), empty_comparison(),
                         moe_rows=_rows(440, 250))
    assert other.set_index("source").loc["measured", "verdict"] == "inconclusive"  # measured under uniform only


@pytest.mark.parametrize("text, message", [
    (hyp(model="no-such-model"), "field 'model': unknown model"),
    (hyp(a="w8a16"), "field 'a': 'w8a16' has no grouped kernel; one of bf16, w4a16, fp8"),
    (hyp(extra='layer = "up"'), "field 'layer': 'up' is not accepted"),
    (hyp(extra='routing = "zipf:-1"'), "field 'routing': malformed routing"),
    (hyp(extra='routing = "HIST"'), "field 'routing': layer 'expert_gate_up' of mixtral-8x7b: routing histogram"),
    (hyp(extra='routing = "NEG"'), "counts must be finite numbers >= 0"),
    (hyp(extra='routing = "FEW"'), "only 1 experts have picks, fewer than top-k=2"),
    (hyp(batch="0"), "field 'batch': must be a positive integer"),
])
def test_bad_moe_hypotheses_one_line_exit_2(capsys, tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "HIST").write_text("1,2,3")
    (tmp_path / "NEG").write_text(json.dumps({"counts": [1, -1, 1, 1, 1, 1, 1, 1]}))
    (tmp_path / "FEW").write_text("5,0,0,0,0,0,0,0")
    with pytest.raises(InputError, match="line"):
        parse_text(text, "x.toml")
    f = tmp_path / "h.toml"
    f.write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["validate", "--hypotheses", str(f), "--csv", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_moe_rows_stay_out_of_the_dense_comparison():
    from tests.compare_fixtures import frame, point
    from workbench.analysis.compare import compare_points

    dense = {**point("bf16_gemv", "bf16", 1, 20e-6), "experts": 1}
    moe = {**point("grouped_bf16_tc", "bf16", 1, 30e-6), "experts": 8, "top_k": 2, "routing": "uniform"}
    got = compare_points(frame([dense, moe]))
    assert list(got["kernel"]) == [dense["kernel"]]

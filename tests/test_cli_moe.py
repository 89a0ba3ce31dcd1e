"""`workbench predict --model M --rollup` on MoE models with --routing and --top-k (issue 33): the expert layers in
the roll-up under the routing, the touched-expert table, and bad input as one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench.interfaces.cli import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_rollup_with_a_skewed_routing_reads_fewer_expert_bytes(capsys, tmp_path):
    base = ["predict", "--model", "qwen3-30b-a3b", "--rollup", "--gpu", "h200-sxm", "--scheme", "bf16,w4a16",
            "--batch", "1,16,64"]
    code, out, err = run(capsys, *base, "--routing", "zipf:1.0", "--csv", str(tmp_path / "zipf.csv"))
    assert code == 0 and "Traceback" not in err
    assert "touched" in out and "zipf:1" in out and "expert_down" in out
    code, out, _ = run(capsys, *base, "--csv", str(tmp_path / "uniform.csv"))
    assert code == 0 and "touched" not in out  # no MoE option: the roll-up as before, uniform routing
    z = pd.read_csv(tmp_path / "zipf.csv").set_index(["scheme", "batch"])
    u = pd.read_csv(tmp_path / "uniform.csv").set_index(["scheme", "batch"])
    assert z.loc[("bf16", 1), "bytes_step"] == pytest.approx(u.loc[("bf16", 1), "bytes_step"])  # k experts at B=1
    assert z.loc[("bf16", 16), "bytes_step"] < u.loc[("bf16", 16), "bytes_step"]
    code, _, _ = run(capsys, *base, "--routing", "uniform", "--csv", str(tmp_path / "u2.csv"))
    assert code == 0
    assert pd.read_csv(tmp_path / "u2.csv")["bytes_step"].tolist() == pytest.approx(
        pd.read_csv(tmp_path / "uniform.csv")["bytes_step"].tolist())


def test_histogram_file_and_top_k(capsys, tmp_path):
    h = tmp_path / "olmoe.json"
    h.write_text(json.dumps({"counts": [1 + (i % 7) for i in range(64)]}))
    code, out, err = run(capsys, "predict", "--model", "olmoe-1b-7b", "--rollup", "--batch", "8", "--routing", str(h),
                         "--top-k", "2")
    assert code == 0 and err == "" and "olmoe.json" in out
    assert "│     2 │" in out  # the top-k column of the touched-expert table


@pytest.mark.parametrize("extra, message", [
    (["--routing", "COUNTS5"], "has 5 counts, but the layer has 128 experts"),
    (["--routing", "NEG"], "count #2 is -3; counts must be finite numbers >= 0"),
    (["--routing", "FEW"], "only 3 experts have picks, fewer than top-k=8"),
    (["--top-k", "200"], "--top-k 200 is out of range for layer 'expert_gate_up' of qwen3-30b-a3b: give 1..128"),
    (["--top-k", "0"], "--top-k 0 is out of range"),
    (["--routing", "zipf:-1"], "expected zipf:S with S a number >= 0"),
    (["--routing", "nofile.json"], "neither a known routing nor a file"),
])
def test_bad_moe_input_is_one_line_exit_2_and_writes_nothing(capsys, tmp_path, extra, message):
    files = {"COUNTS5": "1 2 3 4 5", "NEG": "[1, -3, 4]", "FEW": " ".join(["1"] * 3 + ["0"] * 125)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    extra = [str(tmp_path / e) if e in files else e for e in extra]
    out_csv = tmp_path / "out.csv"
    code, out, err = run(capsys, "predict", "--model", "qwen3-30b-a3b", "--rollup", "--batch", "4", *extra, "--csv",
                         str(out_csv))
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out_csv.exists() and out == ""


@pytest.mark.parametrize("args, message", [
    (["--model", "llama-2-7b", "--rollup", "--routing", "zipf:1"], "has no MoE expert layers"),
    (["--model", "mixtral-8x7b", "--routing", "zipf:1"], "need --model and --rollup"),
    (["--shape", "4096x4096", "--top-k", "2"], "need --model and --rollup"),
])
def test_moe_options_need_an_moe_rollup(capsys, args, message):
    code, _, err = run(capsys, "predict", *args)
    assert code == 2 and message in err and err.count("\n") == 1

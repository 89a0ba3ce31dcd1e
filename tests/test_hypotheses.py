"""The hypothesis format (parsing, one-line errors naming file, line and field) and the noise-aware evaluator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.errors import InputError
from tests.compare_fixtures import GPU, calibration, frame, point
from workbench.analysis.compare import compare_points
from workbench.analysis.hypotheses import check_against_data, evaluate_all, load_hypotheses, parse_text
from workbench.analysis.hypothesis_eval import abs_error_interval, decide

CHAPTER = Path(__file__).resolve().parents[1] / "data" / "hypotheses" / "chapter.toml"
CAL = {GPU: calibration()}

SPEEDUP = """
[[hypothesis]]
id = "s"
kind = "speedup"
a = "w4a16"
b = "bf16"
batch = {batch}
op = "{op}"
value = {value}
"""


def comparison(spread: float = 0.01, **kw) -> object:
    rows = []
    for m, tb, tw in [(1, 13e-6, 4e-6), (4, 13.2e-6, 4.4e-6), (32, 14e-6, 9e-6), (128, 20e-6, 25e-6)]:
        rows.append(point("cublas_bf16", "bf16", m, tb, spread=spread, role="peer", **kw))
        rows.append(point("w4a16_gemv", "w4a16", m, tw, spread=spread, **kw))
    return compare_points(frame(rows), calibrations=CAL)


def run(text: str, cmp, sources=("measured",)):
    return evaluate_all(parse_text(text, "h.toml"), cmp, sources=sources)


# ---------------------------------------------------------------------------------------------------- the format
def test_chapter_file_parses_and_names_valid_schemes():
    hyps = load_hypotheses(CHAPTER)
    assert len(hyps) >= 10 and len({h.id for h in hyps}) == len(hyps)
    assert {h.kind for h in hyps} == {"speedup", "monotonic", "crossover", "model_error", "bandwidth"}
    check_against_data(hyps, comparison().iloc[0:0])  # names are schemes or registered kernels


def test_fields_and_lines_are_recorded():
    h = parse_text(SPEEDUP.format(batch="[1, 4]", op="within", value="[3.0, 4.0]"), "f.toml")[0]
    assert (h.a, h.b, h.batches, h.op, h.threshold) == ("w4a16", "bf16", (1, 4), "within", (3.0, 4.0))
    assert h.line == 2 and h.field_lines["op"] == 8 and h.mode == "cold"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (SPEEDUP.format(batch=1, op="=>", value=2), 8, "op"),  # bad comparator
        (SPEEDUP.format(batch=1, op=">=", value='"x"'), 9, "value"),
        (SPEEDUP.format(batch=1, op="within", value=2), 9, "value"),
        (SPEEDUP.format(batch=1, op="within", value="[4, 3]"), 9, "value"),
        (SPEEDUP.format(batch=0, op=">=", value=2), 7, "batch"),
        (SPEEDUP.format(batch=1, op=">=", value=2).replace('a = "w4a16"\n', ""), 2, "a"),  # missing field
        (SPEEDUP.format(batch=1, op=">=", value=2).replace("speedup", "speedups"), 4, "kind"),
        (SPEEDUP.format(batch=1, op=">=", value=2) + 'colour = "red"\n', 10, "colour"),
        ('[[hypothesis]]\nkind = "speedup"\n', 1, "id"),
        (SPEEDUP.format(batch=1, op=">=", value=2) + 'gpu = "h900"\n', 10, "gpu"),
        (SPEEDUP.format(batch=1, op=">=", value=2) + 'shape = "4096by4096"\n', 10, "shape"),
        (SPEEDUP.format(batch=1, op=">=", value=2) + SPEEDUP.format(batch=1, op=">=", value=2), 11, "id"),
    ],
)
def test_malformed_files_name_file_line_and_field(tmp_path, text, line, field):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_hypotheses(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: line {line}: ") and f"field {field!r}" in message


def test_toml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "syntax.toml"
    path.write_text('[[hypothesis]]\nid = "x"\nkind = speedup\n')
    with pytest.raises(InputError, match=rf"^{path}: line 3: TOML syntax error"):
        load_hypotheses(path)


def test_unknown_scheme_or_kernel_and_unmeasured_batch_are_rejected_against_the_data():
    cmp = comparison()
    bad_name = parse_text(SPEEDUP.format(batch=1, op=">=", value=2).replace('"w4a16"', '"w5a16"'), "u.toml")
    with pytest.raises(InputError, match=r"^u.toml: line 5: hypothesis 's': field 'a': 'w5a16' is neither"):
        check_against_data(bad_name, cmp)
    unmeasured = parse_text(SPEEDUP.format(batch="[1, 8]", op=">=", value=2), "m.toml")
    with pytest.raises(InputError, match=r"^m.toml: line 7: .*field 'batch': batch 8 was not measured; measured"):
        evaluate_all(unmeasured, cmp)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such hypotheses file"):
        load_hypotheses(tmp_path / "none.toml")


# ---------------------------------------------------------------------------------------------------- verdicts
@pytest.mark.parametrize(
    ("low", "high", "op", "thr", "verdict"),
    [
        (3.0, 3.2, ">=", (3.0,), "pass"),
        (2.9, 3.2, ">=", (3.0,), "inconclusive"),
        (2.5, 2.9, ">=", (3.0,), "fail"),
        (0.8, 1.0, "<=", (1.0,), "pass"),
        (0.9, 1.1, "<=", (1.0,), "inconclusive"),
        (1.01, 1.1, "<=", (1.0,), "fail"),
        (3.1, 3.9, "within", (3.0, 4.0), "pass"),
        (3.9, 4.1, "within", (3.0, 4.0), "inconclusive"),
        (2.0, 2.9, "within", (3.0, 4.0), "fail"),
        (4.1, 5.0, "within", (3.0, 4.0), "fail"),
        (float("nan"), 1.0, ">=", (1.0,), "inconclusive"),
    ],
)
def test_decide(low, high, op, thr, verdict):
    assert decide(low, high, op, thr)[0] == verdict


@pytest.mark.parametrize("op", [">=", "<="])
def test_a_margin_inside_the_noise_is_never_pass_or_fail(op):
    cmp = comparison(spread=0.05)  # M=1: 3.25x in [13*0.95/(4*1.05), 13*1.05/(4*0.95)] = [2.94, 3.59]
    for value in np.linspace(2.95, 3.58, 12):
        result = run(SPEEDUP.format(batch=1, op=op, value=value), cmp)
        assert list(result["verdict"]) == ["inconclusive"], value
    outside = run(SPEEDUP.format(batch=1, op=op, value=2.5), cmp)
    assert list(outside["verdict"]) == ["pass" if op == ">=" else "fail"]


def test_speedup_on_measured_and_predicted_separately_with_the_numbers():
    res = run(SPEEDUP.format(batch="[1, 4]", op=">=", value=2.5), comparison(), sources=("measured", "predicted"))
    measured, predicted = res.iloc[0], res.iloc[1]
    assert (measured["source"], measured["verdict"]) == ("measured", "pass")
    assert measured["value"] == pytest.approx(3.0)  # the smallest margin: M=4, 13.2/4.4
    assert measured["low"] == pytest.approx(13.2 * 0.99 / (4.4 * 1.01))
    assert measured["n"] == 2 and "M=1" in measured["evidence"] and "M=4" in measured["evidence"]
    assert (predicted["source"], predicted["verdict"]) == ("predicted", "fail")  # floor tier: 2.42x
    assert predicted["low"] == predicted["high"] == predicted["value"]


def test_throttled_or_missing_data_is_inconclusive():
    throttled = run(SPEEDUP.format(batch=1, op=">=", value=2), comparison(throttled=True))
    assert list(throttled["verdict"]) == ["inconclusive"] and "throttled" in throttled["evidence"].iloc[0]
    only_bf16 = compare_points(frame([point("cublas_bf16", "bf16", 1, 1e-5)]), calibrations=CAL)
    missing = run(SPEEDUP.format(batch=1, op=">=", value=2), only_bf16)
    assert list(missing["verdict"]) == ["inconclusive"]
    empty = run(SPEEDUP.format(batch=1, op=">=", value=2), only_bf16.iloc[0:0])
    assert list(empty["verdict"]) == ["inconclusive"] and empty["gpu_key"].iloc[0] == ""


def test_any_failing_instance_fails_the_hypothesis():
    res = run(SPEEDUP.format(batch="[1, 128]", op=">=", value=1.5), comparison())
    assert res["verdict"].iloc[0] == "fail" and res["detail"].iloc[0].startswith("4096x4096 M=128")


MONO = """
[[hypothesis]]
id = "m"
kind = "monotonic"
a = "w4a16"
b = "bf16"
batches = [{first}, {last}]
{extra}
"""


def _mono_cmp(times_w4: list[float], spread: float = 0.01):
    rows = []
    for m, tw in zip([1, 4, 32, 128], times_w4, strict=True):
        rows.append(point("cublas_bf16", "bf16", m, 12e-6, spread=spread, role="peer"))
        rows.append(point("w4a16_gemv", "w4a16", m, tw, spread=spread))
    return compare_points(frame(rows), calibrations=CAL)


def test_monotonic_pass_fail_and_plateau_inside_the_noise():
    falling = run(MONO.format(first=1, last=128, extra=""), _mono_cmp([4e-6, 4e-6, 8e-6, 16e-6]))
    assert falling["verdict"].iloc[0] == "pass"  # the 1 -> 4 plateau is fine, the overall drop is decisive
    assert falling["value"].iloc[0] == pytest.approx(0.25)  # last / first = 0.75 / 3
    rising = run(MONO.format(first=1, last=128, extra=""), _mono_cmp([4e-6, 3e-6, 8e-6, 16e-6]))
    assert rising["verdict"].iloc[0] == "fail"
    flat = run(MONO.format(first=1, last=4, extra=""), _mono_cmp([4e-6, 4.02e-6, 8e-6, 16e-6]))
    assert flat["verdict"].iloc[0] == "inconclusive"


def test_monotonic_min_drop():
    cmp = _mono_cmp([4e-6, 4e-6, 8e-6, 16e-6])  # at 32: half the batch-1 speedup
    assert run(MONO.format(first=1, last=32, extra="min_drop = 0.25"), cmp)["verdict"].iloc[0] == "pass"
    assert run(MONO.format(first=1, last=32, extra="min_drop = 0.6"), cmp)["verdict"].iloc[0] == "fail"
    assert run(MONO.format(first=1, last=32, extra="min_drop = 0.5"), cmp)["verdict"].iloc[0] == "inconclusive"


CROSS = """
[[hypothesis]]
id = "c"
kind = "crossover"
a = "w4a16"
b = "bf16"
op = "{op}"
value = {value}
"""


def test_crossover_interval_against_the_range():
    cmp = comparison()  # measured: 128 exactly (32 is still 1.56x)
    assert run(CROSS.format(op="within", value="[16, 128]"), cmp)["verdict"].iloc[0] == "pass"
    assert run(CROSS.format(op="<=", value=64), cmp)["verdict"].iloc[0] == "fail"
    tie = _mono_cmp([4e-6, 4e-6, 12.1e-6, 20e-6], spread=0.02)  # M=32 ties (0.99x in the noise), 128 is slower
    res = run(CROSS.format(op=">=", value=64), tie)
    assert res["verdict"].iloc[0] == "inconclusive" and res["low"].iloc[0] == 32 and res["high"].iloc[0] == 128
    never = run(CROSS.format(op=">=", value=64), _mono_cmp([4e-6, 4e-6, 5e-6, 6e-6]))
    assert never["verdict"].iloc[0] == "pass" and np.isinf(never["value"].iloc[0])


def test_bandwidth_needs_a_calibration_and_uses_the_noise():
    text = '[[hypothesis]]\nid = "b"\nkind = "bandwidth"\na = "bf16"\nbatch = 1\nop = ">="\npercent = {p}\n'
    cmp = comparison()  # bf16 at M=1: 33570816 B / 13 µs / 4.4 TB/s = 58.69%
    res = run(text.format(p=50), cmp)
    assert res["verdict"].iloc[0] == "pass"
    assert res["value"].iloc[0] == pytest.approx(33570816 / 13e-6 / 4.4e12 * 100)
    assert run(text.format(p=58.5), cmp)["verdict"].iloc[0] == "inconclusive"
    assert run(text.format(p=70), cmp)["verdict"].iloc[0] == "fail"
    no_cal = compare_points(frame([point("cublas_bf16", "bf16", 1, 13e-6)]))
    assert run(text.format(p=50), no_cal)["verdict"].iloc[0] == "inconclusive"


def test_abs_error_interval_by_hand():
    mid, low, high = abs_error_interval(np.array([8.0, 10.0]), np.array([10.0, 10.0]), np.array([9.0, 9.0]),
                                        np.array([11.0, 11.0]))  # fmt: skip
    assert mid == pytest.approx([0.2, 0.0])
    assert low == pytest.approx([1 - 8 / 9, 0.0])  # prediction inside [p10, p90]: the error may be 0
    assert high == pytest.approx([1 - 8 / 11, 10 / 9 - 1])  # the larger of the two ends


def test_model_error_stat_threshold_and_no_predicted_row():
    text = '[[hypothesis]]\nid = "e"\nkind = "model_error"\ntier = "datasheet"\nop = "<="\npercent = {p}\n'
    cmp = comparison(spread=0.0)

    def t_sheet(nbytes, m):  # by hand: max(bytes / 4.8e12, 2·M·4096² / 989.4e12)
        return max(nbytes / 4.8e12, 2 * m * 4096 * 4096 / 989.4e12)

    errors = []  # bf16 bytes 33_554_432 + M·16_384; w4a16 8_716_288 + M·16_384 (weights + scales and zeros)
    for m, tb, tw in [(1, 13e-6, 4e-6), (4, 13.2e-6, 4.4e-6), (32, 14e-6, 9e-6), (128, 20e-6, 25e-6)]:
        errors += [abs(t_sheet(33_554_432 + m * 16_384, m) / tb - 1), abs(t_sheet(8_716_288 + m * 16_384, m) / tw - 1)]
    expected = float(np.median(errors))
    res = run(text.format(p=expected * 100 + 1), cmp, sources=("measured", "predicted"))
    assert list(res["source"]) == ["measured"] and res["verdict"].iloc[0] == "pass"
    assert res["value"].iloc[0] == pytest.approx(expected * 100)
    assert run(text.format(p=expected * 100 - 1), cmp)["verdict"].iloc[0] == "fail"


def test_each_gpu_is_evaluated_separately():
    rows = []
    for gpu in (GPU, "h100-sxm"):
        rows += [point("cublas_bf16", "bf16", 1, 13e-6, gpu=gpu), point("w4a16_gemv", "w4a16", 1, 4e-6, gpu=gpu)]
    cmp = compare_points(frame(rows), calibrations=CAL)
    res = run(SPEEDUP.format(batch=1, op=">=", value=3), cmp)
    assert sorted(res["gpu_key"]) == ["h100-sxm", GPU]
    only = run(SPEEDUP.format(batch=1, op=">=", value=3) + 'gpu = "h100-sxm"\n', cmp)
    assert list(only["gpu_key"]) == ["h100-sxm"]

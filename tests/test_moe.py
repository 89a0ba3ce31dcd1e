"""The MoE routing model (models/moe.py): inclusion probabilities, Zipf shares, the touched/busiest expectations
against a Monte-Carlo draw, histogram files, the routed token list, grouped-layer traffic and the roll-up."""

from __future__ import annotations

import numpy as np
import pytest

from models.errors import InputError
from models.moe import Routing, draw, expert_load, grouped_traffic, inclusion, parse_routing, read_histogram, route
from models.rollup import rollup
from models.workloads import Layer, Model
from models.workloads import expert_load as uniform_load


def test_zipf_shares_sum_to_one_and_fall_as_rank_to_the_minus_s():
    p = Routing("zipf", zipf_s=1.5).shares(64)
    assert p.sum() == pytest.approx(1.0) and p[0] / p[1] == pytest.approx(2**1.5) and p[0] / p[3] == pytest.approx(8)
    assert np.allclose(parse_routing("zipf:0").shares(8), 1 / 8)


def test_inclusion_is_k_over_e_uniform_and_caps_at_one():
    assert np.allclose(inclusion(np.full(8, 1 / 8), 2), 0.25)
    q = inclusion(np.array([0.7, 0.1, 0.1, 0.1]), 2)
    # 2·0.7 > 1: expert 0 capped at 1, the one remaining pick spread over the others by their shares
    assert q == pytest.approx([1.0, 1 / 3, 1 / 3, 1 / 3]) and q.sum() == pytest.approx(2)
    q = inclusion(Routing("zipf", zipf_s=2.0).shares(16), 8)
    assert q.max() == 1.0 and q.sum() == pytest.approx(8) and np.all(q <= 1)


def test_uniform_load_matches_the_closed_form():
    load = expert_load([1, 2, 16, 256], 8, 2)
    active, tokens = uniform_load(np.array([1, 2, 16, 256]), 8, 2)
    assert np.allclose(load.touched, active) and np.allclose(load.tokens, tokens)
    assert load.touched[1] == pytest.approx(8 * (1 - (6 / 8) ** 2))
    # B = 1: exactly k experts, one row each, under any routing
    z = expert_load([1], 64, 8, "zipf:1.2")
    assert z.touched[0] == pytest.approx(8) and z.busiest[0] == pytest.approx(1) and z.tokens[0] == pytest.approx(1)


def test_dense_layer_load():
    d = expert_load([4], 1, 1)
    assert (d.touched[0], d.tokens[0], d.busiest[0]) == (1, 4, 4)


@pytest.mark.parametrize("routing, batch", [("uniform", 16), ("zipf:1.0", 16), ("zipf:0.6", 64)])
def test_expectations_agree_with_a_monte_carlo_draw(routing, batch):
    E, k, trials = 64, 8, 600
    touched, busiest = [], []
    for seed in range(trials):
        counts = np.bincount(draw(batch, E, k, routing, seed=seed).ravel(), minlength=E)
        touched.append(np.count_nonzero(counts))
        busiest.append(counts.max())
    load = expert_load([batch], E, k, routing)
    assert np.mean(touched) == pytest.approx(load.touched[0], rel=0.02)
    assert np.mean(busiest) == pytest.approx(load.busiest[0], rel=0.06)
    assert load.busiest[0] > load.tokens[0]  # the busiest expert takes more than the mean


def test_draw_gives_k_distinct_experts_with_the_inclusion_probabilities():
    E, k = 16, 4
    c = draw(4000, E, k, "zipf:1.0", seed=3)
    assert c.shape == (4000, k) and all(len(set(row)) == k for row in c[:500])
    freq = np.bincount(c.ravel(), minlength=E) / 4000
    assert np.allclose(freq, inclusion(Routing("zipf", zipf_s=1.0).shares(E), k), atol=0.025)
    assert np.array_equal(draw(8, E, k, seed=5), draw(8, E, k, seed=5))  # a seed fixes the problem


def test_route_sorts_tokens_by_expert():
    tokens, offsets = route(np.array([[2, 0], [2, 1], [0, 3]]), 5)
    assert offsets.tolist() == [0, 2, 3, 5, 6, 6]  # expert 4 has no rows
    assert tokens.tolist() == [0, 2, 1, 0, 1, 2]
    assert tokens.dtype == np.int32 and offsets.dtype == np.int32


def test_histogram_files(tmp_path):
    j = tmp_path / "h.json"
    j.write_text('{"counts": [3, 1, 0, 4]}')
    t = tmp_path / "h.txt"
    t.write_text("3, 1\n0 4\n")
    assert read_histogram(j) == read_histogram(t) == (3.0, 1.0, 0.0, 4.0)
    r = parse_routing(str(j))
    assert r.kind == "histogram" and np.allclose(r.shares(4), [3 / 8, 1 / 8, 0, 4 / 8])
    assert expert_load([1], 4, 3, r).touched[0] == pytest.approx(3)


@pytest.mark.parametrize("text, message", [
    ('{"counts": [1, -2, 3]}', "count #2 is -2; counts must be finite numbers >= 0"),
    ("1 x 3", "count #2 is 'x'"),
    ("0 0 0", "every count is 0"),
    ('{"other": 1}', "expected a list of counts per expert"),
    ("", "expected a list of counts per expert"),
])
def test_bad_histograms(tmp_path, text, message):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        read_histogram(p)


def test_routing_checks_against_the_layer(tmp_path):
    p = tmp_path / "h.txt"
    p.write_text("1 1 1 0")
    with pytest.raises(InputError, match="has 4 counts, but the layer has 8 experts"):
        expert_load([4], 8, 2, str(p))
    with pytest.raises(InputError, match="only 3 experts have picks, fewer than top-k=4"):
        expert_load([4], 4, 4, str(p))
    with pytest.raises(InputError, match=r"top-k must be in \[1, experts=4\], got top-k=5"):
        expert_load([4], 4, 5)
    for bad in ("zipf:-1", "zipf:x", "zipf"):
        with pytest.raises(InputError, match="expected zipf:S"):
            parse_routing(bad)
    with pytest.raises(InputError, match="neither a known routing nor a file"):
        parse_routing(str(tmp_path / "missing.json"))


def test_grouped_traffic_by_hand():
    load = expert_load([2], 4, 2)  # touched 4·(1 − (1/2)²) = 3, B·k = 4 rows
    t = grouped_traffic("bf16", load, 8, 16)
    assert t["weight_bytes"][0] == pytest.approx(3 * 8 * 16 * 2)
    assert t["bytes"][0] == pytest.approx(3 * 8 * 16 * 2 + 4 * 16 * 2 + 4 * 8 * 2)
    assert t["flops"][0] == pytest.approx(2 * 4 * 8 * 16)


def test_rollup_by_hand_with_a_skewed_routing():
    toy = Model("toy", "Toy", (Layer("dense", 64, 128, 2), Layer("experts", 32, 128, 3, experts=4, top_k=2)))
    r = rollup(toy, "h200-sxm", ["bf16"], [1, 2], routing="zipf:1.0").set_index("batch")
    # B = 1: 2 experts touched, 1 row each; B = 2: touched = Σ 1 − (1 − q_e)², q = inclusion(shares ∝ 1/r)
    q = inclusion(np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12), 2)
    touched2 = np.sum(1 - (1 - q) ** 2)
    dense = lambda m: 2 * (64 * 128 * 2 + m * 128 * 2 + m * 64 * 2)  # noqa: E731
    expert = lambda m, n: 3 * n * (32 * 128 * 2 + m * 128 * 2 + m * 32 * 2)  # noqa: E731
    assert r.loc[1, "bytes_step"] == pytest.approx(dense(1) + expert(1, 2))
    assert r.loc[2, "bytes_step"] == pytest.approx(dense(2) + expert(4 / touched2, touched2))
    uniform = rollup(toy, "h200-sxm", ["bf16"], [2]).iloc[0]
    assert uniform["bytes_step"] == pytest.approx(dense(2) + expert(4 / 3, 3))
    assert r.loc[2, "bytes_step"] < uniform["bytes_step"]  # skew touches fewer experts


def test_grouped_layers_by_hand():
    from models.hardware import get_gpu
    from models.moe import grouped_layers

    toy = Model("toy", "Toy", (Layer("dense", 64, 128, 2), Layer("experts", 32, 128, 3, experts=4, top_k=2)))
    g = grouped_layers(toy, "h200-sxm", ["bf16"], [2]).iloc[0]
    # touched 3, 4 rows: 3·32·128·2 weight bytes + 4·128·2 in + 4·32·2 out; memory-bound at the datasheet bandwidth
    nbytes = 3 * 32 * 128 * 2 + 4 * 128 * 2 + 4 * 32 * 2
    assert (g["layer"], g["touched"], g["rows_mean"]) == ("experts", pytest.approx(3), pytest.approx(4 / 3))
    assert g["bytes"] == pytest.approx(nbytes) and g["flops"] == pytest.approx(2 * 4 * 32 * 128)
    assert g["time_datasheet_s"] == pytest.approx(nbytes / get_gpu("h200-sxm").bandwidth)
    assert np.isnan(g["time_floor_s"])  # no calibration given: the floor tier stays NaN

"""The workload catalogue reader, message by message, on files written by the test (issue 21). The shipped
catalogue is parsed at import time, before any mutant is active, so these tests call the reader directly."""

from __future__ import annotations

import numpy as np
import pytest

from models.errors import InputError
from models.workloads import Layer, Model, _load, expert_load, get_model, parse_shape

GOOD = """
[models.toy]
name = "Toy"
notes = "two layers"
layers = [
  { name = "qkv", N = 96, K = 32, count = 2 },
  { name = "experts", N = 64, K = 32, count = 2, experts = 4, top_k = 2 },
]
[shapes]
square = [32, 32]
"""


def load(tmp_path, text):
    p = tmp_path / "w.toml"
    p.write_text(text)
    return _load(p), p


def test_catalogue_parsed_by_hand(tmp_path):
    (models, shapes), _ = load(tmp_path, GOOD)
    m = models["toy"]
    assert (m.key, m.name, m.notes) == ("toy", "Toy", "two layers")
    assert m.layers == (Layer("qkv", 96, 32, 2, 1, 1), Layer("experts", 64, 32, 2, 4, 2))
    # params: 96·32·2 + 64·32·2·4 = 6144 + 16384
    assert m.layers[1].params == 16_384 and m.params == 22_528
    assert shapes == {"square": (32, 32)}
    bare, _ = load(tmp_path, "[models.b]\nlayers = [{ name = 'o', N = 8, K = 8, count = 1 }]\n")
    assert bare[0]["b"].name == "b" and bare[0]["b"].notes == "" and bare[1] == {}


@pytest.mark.parametrize("layers, message", [
    ("[]", "needs a non-empty 'layers' list"),
    ("'x'", "needs a non-empty 'layers' list"),
    ("[{ N = 8, K = 8, count = 1 }]", "layer #1: each layer needs a name, N, K and count"),
    ("[1]", "layer #1: each layer needs a name, N, K and count"),
    ("[{ name = 'a', N = 8, K = 8, count = 1 }, { name = 'b', N = 0, K = 8, count = 1 }]",
     "layer #2: field 'N' must be a positive integer, got 0"),
    ("[{ name = 'a', N = 8, K = 8.5, count = 1 }]", "layer #1: field 'K' must be a positive integer, got 8.5"),
    ("[{ name = 'a', N = 8, K = 8, count = true }]", "layer #1: field 'count' must be a positive integer, got True"),
    ("[{ name = 'a', N = 8, K = 8 }]", "layer #1: field 'count' must be a positive integer, got None"),
    ("[{ name = 'a', N = 8, K = 8, count = 1, experts = 2, top_k = 3 }]", "layer #1: top_k=3 exceeds experts=2"),
    ("[{ name = 'a', N = 8, K = 8, count = 1, experts = 0 }]",
     "layer #1: field 'experts' must be a positive integer, got 0"),
    ("[{ name = 'a', N = 8, K = 8, count = 1 }, { name = 'a', N = 8, K = 8, count = 1 }]", "duplicate layer names"),
])
def test_bad_models_name_file_model_and_layer(tmp_path, layers, message):
    with pytest.raises(InputError) as info:
        load(tmp_path, f"[models.bad]\nlayers = {layers}\n")
    assert str(info.value) == f"{tmp_path / 'w.toml'}: model 'bad'{'' if 'layer #' in message else ': '}" + (
        f" {message}" if "layer #" in message else message)


@pytest.mark.parametrize("value", ["[32]", "[32, 0]", "['a', 'b']", "32"])
def test_bad_shapes(tmp_path, value):
    with pytest.raises(InputError) as info:
        load(tmp_path, f"[shapes]\nx = {value}\n")
    assert str(info.value) == f"{tmp_path / 'w.toml'}: shape 'x' must be [N, K] with positive integers"


def test_unreadable_catalogues(tmp_path):
    with pytest.raises(InputError, match=r"^cannot read the workload catalogue .*w\.toml: "):
        load(tmp_path, "[models\n")
    with pytest.raises(InputError, match=r"^cannot read the workload catalogue .*none\.toml: "):
        _load(tmp_path / "none.toml")


def test_parse_shape_messages_and_separators():
    assert parse_shape(" 22016 x 4096 ") == (22016, 4096) and parse_shape("8X4") == (8, 4)
    assert parse_shape("8×4") == (8, 4)
    for bad in ("0x4096", "4096x0"):
        with pytest.raises(InputError, match=rf"^malformed shape '{bad}'; N and K must be positive, e\.g\. "
                                             r"22016x4096$"):
            parse_shape(bad)
    for bad in ("4096", "4096x", "-1x4", "axb"):
        with pytest.raises(InputError, match=rf"^malformed shape '{bad}'; expected NxK with positive integers, "):
            parse_shape(bad)
    with pytest.raises(InputError, match=r"^malformed shape 12; expected"):
        parse_shape(12)


def test_model_lookup_and_expert_load_by_hand():
    assert get_model("  LLAMA-2-7B ").key == "llama-2-7b"
    with pytest.raises(InputError, match=r"^unknown model 'gpt-9'; valid: "):
        get_model("gpt-9")
    # E = 8, k = 2 at M = 4: 8·(1 − 0.75⁴) = 5.46875 experts, 4·2 / 5.46875 tokens each
    active, tokens = expert_load(np.array([1.0, 4.0]), 8, 2)
    assert active.tolist() == pytest.approx([2.0, 5.46875]) and tokens.tolist() == pytest.approx([1.0, 8 / 5.46875])
    one, m = expert_load(3, 1, 1)
    assert float(one) == 1.0 and float(m) == 3.0
    assert Model("k", "n", (Layer("a", 2, 3, 4, 5, 1),)).params == 120


def test_shape_edges_top_k_message_and_two_experts(tmp_path):
    # a named shape keeps N and K apart; 1 is a positive size (a 1 x K weight, a 1-element reduction)
    (_, shapes), _ = load(tmp_path, "[shapes]\nwide = [1, 32]\ntall = [64, 1]\n")
    assert shapes == {"wide": (1, 32), "tall": (64, 1)}
    assert parse_shape("1x4096") == (1, 4096) and parse_shape("4096x1") == (4096, 1)
    with pytest.raises(InputError) as info:
        load(tmp_path, "[models.bad]\nlayers = [{ name = 'a', N = 8, K = 8, count = 1, experts = 2, top_k = 0 }]\n")
    assert str(info.value) == (f"{tmp_path / 'w.toml'}: model 'bad' layer #1: field 'top_k' must be a positive "
                               "integer, got 0")
    # E = 2, k = 1 at M = 3: 2·(1 − 0.5³) = 1.75 experts, 3 / 1.75 tokens each
    active, tokens = expert_load(np.array([3.0]), 2, 1)
    assert active.tolist() == pytest.approx([1.75]) and tokens.tolist() == pytest.approx([3 / 1.75])

"""LLM layer shapes (checked against each model's config arithmetic), shape parsing and MoE expert load."""

import numpy as np
import pytest

from models.errors import InputError
from models.workloads import SHAPES, expert_load, get_model, model_keys, parse_shape

# hidden, kv heads (of 128), intermediate, layers, vocab
CONFIGS = {
    "llama-2-7b": (4096, 32, 11008, 32, 32000),
    "llama-3-8b": (4096, 8, 14336, 32, 128256),
    "llama-2-70b": (8192, 8, 28672, 80, 32000),
    "mistral-7b": (4096, 8, 14336, 32, 32000),
    "qwen2.5-7b": (3584, 4, 18944, 28, 152064),
    "mixtral-8x7b": (4096, 8, 14336, 32, 32000),
}


def test_catalogue_has_the_chapter_layer_and_every_model():
    assert set(CONFIGS) | {"chapter-4096"} <= set(model_keys())
    assert SHAPES["4096x4096"] == (4096, 4096)
    chapter = get_model("chapter-4096")
    assert [(layer.N, layer.K, layer.count) for layer in chapter.layers] == [(4096, 4096, 1)]


@pytest.mark.parametrize("key", list(CONFIGS))
def test_layer_shapes_follow_the_config(key):
    hidden, kv, inter, n_layers, vocab = CONFIGS[key]
    layers = {layer.name: layer for layer in get_model(key).layers}
    assert (layers["qkv"].N, layers["qkv"].K) == (hidden + 2 * kv * 128, hidden)
    assert (layers["o"].N, layers["o"].K) == (hidden, hidden)
    up = layers.get("gate_up") or layers["expert_gate_up"]
    down = layers.get("down") or layers["expert_down"]
    assert (up.N, up.K) == (2 * inter, hidden)
    assert (down.N, down.K) == (hidden, inter)
    assert all(layer.count == n_layers for name, layer in layers.items() if name not in ("lm_head",))
    assert (layers["lm_head"].N, layers["lm_head"].K, layers["lm_head"].count) == (vocab, hidden, 1)


def test_parameter_counts_match_the_published_sizes():
    # linear-layer parameters (embedding lookup excluded): published totals minus vocab x hidden
    assert get_model("llama-2-7b").params == pytest.approx(6.74e9 - 32000 * 4096, rel=0.01)
    assert get_model("llama-3-8b").params == pytest.approx(8.03e9 - 128256 * 4096, rel=0.01)
    assert get_model("llama-2-70b").params == pytest.approx(68.98e9 - 32000 * 8192, rel=0.01)
    assert get_model("mixtral-8x7b").params == pytest.approx(46.7e9 - 32000 * 4096, rel=0.01)
    experts = {layer.name: layer for layer in get_model("mixtral-8x7b").layers}["expert_gate_up"]
    assert (experts.experts, experts.top_k) == (8, 2)


def test_parse_shape():
    assert parse_shape("22016x4096") == (22016, 4096)
    assert parse_shape(" 4096 X 11008 ") == (4096, 11008)
    assert parse_shape("4096×4096") == (4096, 4096)
    for bad in ("22016x", "x4096", "axb", "0x4096", "-1x4096", "4096*4096", "4096x4096x2", ""):
        with pytest.raises(InputError, match="malformed shape"):
            parse_shape(bad)


def test_unknown_model_lists_valid_keys():
    with pytest.raises(InputError, match=r"unknown model 'gpt-5'; valid: .*llama-2-7b"):
        get_model("gpt-5")
    assert get_model("Llama-2-7B").key == "llama-2-7b"


def test_expert_load():
    active, tokens = expert_load(np.array([1, 2, 1024]), 8, 2)
    assert active[0] == pytest.approx(2) and tokens[0] == pytest.approx(1)
    assert active[1] == pytest.approx(8 * (1 - 0.75**2))
    assert active[2] == pytest.approx(8) and tokens[2] == pytest.approx(1024 * 2 / 8)
    assert np.allclose(active * tokens, np.array([1, 2, 1024]) * 2)  # token-expert pairs are conserved
    dense_active, dense_tokens = expert_load(np.array([3.0]), 1, 1)
    assert dense_active[0] == 1 and dense_tokens[0] == 3


# MoE models (issue 33): hidden, expert intermediate, experts, top-k, MoE layers, published total minus embedding
MOE = {
    "qwen3-30b-a3b": (2048, 768, 128, 8, 48, 30.5e9 - 151936 * 2048),
    "deepseek-v3": (7168, 2048, 256, 8, 58, 671e9 - 129280 * 7168),
    "olmoe-1b-7b": (2048, 1024, 64, 8, 16, 6.92e9 - 50304 * 2048),
}


@pytest.mark.parametrize("key", list(MOE))
def test_moe_models_follow_their_configs(key):
    hidden, inter, experts, top_k, moe_layers, published = MOE[key]
    layers = {layer.name: layer for layer in get_model(key).layers}
    up, down = layers["expert_gate_up"], layers["expert_down"]
    assert (up.N, up.K, down.N, down.K) == (2 * inter, hidden, hidden, inter)
    assert {(x.experts, x.top_k, x.count) for x in (up, down)} == {(experts, top_k, moe_layers)}
    assert (layers["router"].N, layers["router"].K, layers["router"].count) == (experts, hidden, moe_layers)
    assert get_model(key).params == pytest.approx(published, rel=0.012)


def test_deepseek_v3_shared_expert_and_dense_layers_are_dense():
    layers = {layer.name: layer for layer in get_model("deepseek-v3").layers}
    assert (layers["shared_gate_up"].N, layers["shared_gate_up"].experts, layers["shared_gate_up"].count) == (
        4096, 1, 58)
    assert (layers["dense_gate_up"].N, layers["dense_down"].K, layers["dense_down"].count) == (36864, 18432, 3)
    assert all(layer.count in (3, 58, 61, 1) for layer in layers.values())

"""bench/moe_heldout.py checks grouped_bf16_wg's launch defaults on layers no default was picked on: they must stay
out of the catalogue, and their shapes must be ones the wgmma chooser takes (CPU only)."""

from __future__ import annotations

from bench import moe_heldout
from kernels.grouped import grouped_config
from models.workloads import get_model, model_keys


def test_heldout_layers_are_not_catalogue_layers():
    catalogue = {(x.N, x.K, x.experts, x.top_k) for key in model_keys() for x in get_model(key).layers}
    assert not any(m in model_keys() for m, *_ in moe_heldout.LAYERS)
    assert not {(N, K, E, k) for _, _, N, K, E, k in moe_heldout.LAYERS} & catalogue


def test_heldout_layers_take_both_configurations():
    for _, _, N, K, E, k in moe_heldout.LAYERS:
        for B in (16, 256):
            grouped_config.choose_wg_config(B, N, K, E, k)
            grouped_config.choose_wg_config(B, N, K, E, k, **moe_heldout.FIRST)


def test_read_time_falls_back_to_the_1gb_bandwidth_above_the_pool():
    from bench.bench_moe import read_time

    def limit(n):
        return n / 4e12, 0

    assert read_time(limit, 1e9, 2e12) == (0.25e-3, "read curve")
    assert read_time(limit, 3 << 30, 2e12) == ((3 << 30) / 2e12, "1 GB bandwidth")

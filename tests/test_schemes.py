"""Byte/FLOP accounting of every scheme, checked against hand-computed cases."""

import numpy as np
import pytest

from models.errors import InputError
from models.schemes import SCHEME_NAMES, all_schemes, get_scheme, traffic

N, K = 4096, 4096


def hand(M, weight, meta, act, out):
    return {"weight": weight, "meta": meta, "act": act, "out": out, "total": weight + meta + act + out,
            "flops": 2 * M * N * K}


# Hand-computed bytes at N = K = 4096 for M = 1 and M = 16 (weights, metadata, activations, outputs).
CASES = {
    "fp32": lambda M: hand(M, N * K * 4, 0, M * K * 4, M * N * 4),
    "fp16": lambda M: hand(M, N * K * 2, 0, M * K * 2, M * N * 2),
    "bf16": lambda M: hand(M, N * K * 2, 0, M * K * 2, M * N * 2),
    # one fp16 scale per output row
    "w8a16": lambda M: hand(M, N * K, N * 2, M * K * 2, M * N * 2),
    # 4-bit weights; per group of 128: fp16 scale (2 B) + 4-bit zero (0.5 B)
    "w4a16": lambda M: hand(M, N * K // 2, N * (K // 128) * 2.5, M * K * 2, M * N * 2),
    # fp32 scale per weight row + fp32 scale per token; int8 activations; 16-bit outputs
    "w8a8": lambda M: hand(M, N * K, N * 4 + M * 4, M * K, M * N * 2),
    # per-tensor fp32 scales for the weight and the activation
    "fp8": lambda M: hand(M, N * K, 8, M * K, M * N * 2),
    # e2m1 + e4m3 scale per 16 (weights and activations) + two fp32 tensor scales
    "nvfp4": lambda M: hand(M, N * K // 2, N * K // 16 + M * K // 16 + 8, M * K // 2, M * N * 2),
    # e2m1 + e8m0 scale per 32 (weights and activations)
    "mxfp4": lambda M: hand(M, N * K // 2, N * K // 32 + M * K // 32, M * K // 2, M * N * 2),
}


def test_every_scheme_has_a_hand_case():
    assert set(CASES) == set(SCHEME_NAMES)


@pytest.mark.parametrize("name", SCHEME_NAMES)
@pytest.mark.parametrize("M", [1, 16])
def test_bytes_and_flops_by_hand(name, M):
    t = traffic(name, M, N, K)
    want = CASES[name](M)
    assert t.weight_bytes == want["weight"]
    assert t.scale_bytes == pytest.approx(want["meta"])
    assert t.act_bytes == want["act"]
    assert t.out_bytes == want["out"]
    assert t.bytes == pytest.approx(want["total"])
    assert t.flops == want["flops"]
    assert t.intensity == pytest.approx(want["flops"] / want["total"])


def test_w4a16_ideal_speedup_over_bf16_is_16_over_4156():
    s = get_scheme("w4a16")
    assert s.bits_per_weight == pytest.approx(4.15625)
    big = (1, 28672, 8192)
    ratio = traffic("bf16", *big).bytes / traffic("w4a16", *big).bytes
    assert ratio == pytest.approx(16 / 4.15625, rel=2e-3)  # activations and outputs are negligible at batch 1
    assert 3.84 < ratio < 3.86


def test_scale_and_zero_overhead_is_about_3_percent_at_g128():
    t = traffic("w4a16", 1, 22016, 4096)
    assert t.scale_bytes / t.weight_bytes == pytest.approx(2.5 / 64)  # 3.9%: fp16 scale + 4-bit zero per 128
    t_scale_only = traffic(get_scheme("w4a16", zero="none"), 1, 22016, 4096)
    assert t_scale_only.scale_bytes / t_scale_only.weight_bytes == pytest.approx(0.03125)  # 3.1%: scale alone
    assert 0.03 <= t.scale_bytes / t.bytes <= 0.04


def test_w4a16_parameters_change_the_metadata():
    base = traffic("w4a16", 1, N, K).scale_bytes
    assert traffic(get_scheme("w4a16", group_size=64), 1, N, K).scale_bytes == pytest.approx(2 * base)
    assert traffic(get_scheme("w4a16", zero="fp16"), 1, N, K).scale_bytes == pytest.approx(N * 32 * 4)
    assert traffic(get_scheme("w4a16", scale_dtype="fp32", zero="none"), 1, N, K).scale_bytes == N * 32 * 4
    per_row = get_scheme("w4a16", group_size=0)
    assert per_row.granularity == "per_channel"
    assert traffic(per_row, 1, N, K).scale_bytes == N * 2.5


def test_fp8_granularities():
    per_channel = traffic(get_scheme("fp8", granularity="per_channel"), 4, N, K)
    assert per_channel.scale_bytes == N * 4 + 4 * 4
    block = traffic(get_scheme("fp8", granularity="block"), 4, 4100, 4096)
    # 128x128 weight blocks (rounded up: 33 x 32) and 1x128 activation blocks per token
    assert block.scale_bytes == 33 * 32 * 4 + 4 * 32 * 4


def test_compute_units_and_runnable():
    units = {s.name: s.compute_unit for s in all_schemes()}
    assert units == {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "w8a16": "fp16", "w4a16": "fp16",
                     "w8a8": "int8", "fp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}
    assert {s.name for s in all_schemes() if not s.runnable} == {"nvfp4", "mxfp4"}
    assert [s.name for s in all_schemes(runnable_only=True)] == list(SCHEME_NAMES[:7])
    for s in all_schemes():
        assert s.dequant_ops_per_weight >= 0 and s.description
    assert get_scheme("w4a16").dequant_ops_per_weight > get_scheme("w8a16").dequant_ops_per_weight > 0
    assert get_scheme("bf16").dequant_ops_per_weight == 0


def test_vectorized_matches_scalar():
    Ms = np.array([1, 3, 64, 256])
    Ns = np.array([4096, 22016, 12288, 4096])
    Ks = np.array([4096, 4096, 4096, 11008])
    vec = traffic("w4a16", Ms, Ns, Ks)
    for i in range(len(Ms)):
        one = traffic("w4a16", int(Ms[i]), int(Ns[i]), int(Ks[i]))
        assert vec.bytes[i] == one.bytes and vec.flops[i] == one.flops
    broadcast = traffic("bf16", Ms, 4096, 4096)
    assert broadcast.weight_bytes.shape == (4,) and np.all(broadcast.weight_bytes == 4096 * 4096 * 2)


def test_bad_input_is_one_line_input_error():
    with pytest.raises(InputError, match="valid: .*w4a16"):
        get_scheme("int3")
    with pytest.raises(InputError, match="not divisible by the group size 128"):
        traffic("w4a16", 1, 4096, 4100)
    with pytest.raises(InputError, match="not divisible by the group size 16"):
        traffic("nvfp4", 1, 4096, 4104)
    with pytest.raises(InputError, match="M must be a positive"):
        traffic("bf16", 0, 4096, 4096)
    with pytest.raises(InputError, match="M must be a positive"):
        traffic("bf16", np.array([1, -2]), 4096, 4096)
    with pytest.raises(InputError, match="N must be a positive"):
        traffic("bf16", 1, 0, 4096)
    with pytest.raises(InputError, match="does not take"):
        get_scheme("bf16", group_size=128)
    with pytest.raises(InputError, match="group size must be an integer"):
        get_scheme("w4a16", group_size=-1)
    with pytest.raises(InputError, match="zero-point storage"):
        get_scheme("w4a16", zero="int2")
    with pytest.raises(InputError, match="fp8 granularity"):
        get_scheme("fp8", granularity="per_row")
    assert get_scheme("w4a16", group_size=None) == get_scheme("w4a16")  # None means the default

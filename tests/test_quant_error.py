"""The quantization error explorer (workbench.analysis.quant_error, kernels.quant.quant.fake_quantize) reproduces the
chapter's claims on synthetic weights, uses the canonical quantizers' arithmetic, and loads real matrices."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernels.quant import quant
from models.errors import InputError
from models.schemes import GROUP_SIZES
from workbench.analysis import quant_error as qe

C = quant.Choice


def _err(w, c):
    return float(np.linalg.norm(quant.fake_quantize(w, c) - w) / np.linalg.norm(w))


@pytest.mark.parametrize("kind", ["columns", "rows"])
@pytest.mark.parametrize("fmt,sym,zero", [("int4", True, "none"), ("int4", False, "int4"), ("int8", True, "none")])
def test_group_beats_channel_beats_tensor_with_outlier_channels(kind, fmt, sym, zero):
    w = qe.make_weights("outliers", 512, 2048, seed=3, outliers=kind, rate=0.01, magnitude=20.0)
    df = qe.explore(w, [C(fmt, "tensor", 0, sym, zero), C(fmt, "channel", 0, sym, zero),
                        C(fmt, "group", 128, sym, zero)])
    tensor, channel, group = df["weight_error_rel"]
    assert group < channel < tensor
    assert (df["output_error_rel"].diff().dropna() < 0).all()  # the same order on y = x W^T


def test_groups_isolate_outlier_columns():
    """Without outliers a group of 128 beats a whole row by a modest factor; with outlier input channels (which every
    row holds) the factor grows: the group confines an outlier's scale to its 128 weights."""
    clean = qe.make_weights("gaussian", 512, 2048, seed=1)
    dirty = qe.make_weights("outliers", 512, 2048, seed=1, outliers="columns", rate=0.005, magnitude=30.0)
    ch, g = C("int4", "channel"), C("int4", "group", 128)
    assert _err(dirty, ch) / _err(dirty, g) > 1.25 * _err(clean, ch) / _err(clean, g)  # 1.75 against 1.28
    gs = [_err(dirty, C("int4", "group", G)) for G in GROUP_SIZES]  # smaller groups, smaller error
    assert gs == sorted(gs)


def test_scale_and_zero_overhead_at_g128_is_about_3_percent():
    w = qe.make_weights("gaussian", 256, 4096, seed=0)
    df = qe.explore(w, [C("int4", "group", 128), C("int4", "group", 128, False, "int4")]).set_index("label")
    assert df.loc["int4 g128 sym", "overhead"] == pytest.approx(16 / 128 / 4)  # 3.1 %: an fp16 scale per 128
    assert df.loc["int4 g128 zero int4", "overhead"] == pytest.approx(20 / 128 / 4)  # 3.9 %: + a 4-bit zero
    assert df.loc["int4 g128 zero int4", "bits_per_weight"] == pytest.approx(4.15625)  # the chapter's 16 / 4.156
    for v in df["overhead"]:
        assert 0.03 <= v < 0.04


def test_bytes_come_from_models_schemes():
    from models.schemes import get_scheme, traffic

    N, K = 4096, 11008
    c = C("int4", "group", 128, False, "int4")
    t = traffic(get_scheme("w4a16"), 1, N, K)
    assert qe.bytes_per_weight(c, N, K) * N * K == pytest.approx(t.weight_bytes + t.scale_bytes - 0.0)
    fp8 = traffic(get_scheme("fp8", granularity="block"), 1, N, K)
    act_scales = 1 * (K // 128) * 4
    assert qe.bytes_per_weight(C("fp8", "block", 128, scale_dtype="fp32"), N, K) * N * K == pytest.approx(
        fp8.weight_bytes + fp8.scale_bytes - act_scales)


def test_fake_quantize_is_the_canonical_arithmetic():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 1024)) * 0.02
    w[:, ::97] *= 15
    assert np.array_equal(quant.fake_quantize(w, C("int4", "group", 128, False, "int4")),
                          quant.dequantize_w4(quant.quantize_w4(w, 128)))
    assert np.array_equal(quant.fake_quantize(w, C("int8", "channel")), quant.dequantize_w8(quant.quantize_w8(w)))
    for per in ("tensor", "channel"):
        assert np.array_equal(quant.fake_quantize(w, C("fp8", per, scale_dtype="fp32")),
                              quant.dequantize_fp8(quant.quantize_fp8(w, per)))
    w2 = rng.standard_normal((300, 520))  # partial edge blocks
    assert np.array_equal(quant.fake_quantize(w2, C("fp8", "block", 128, scale_dtype="fp32")),
                          quant.dequantize_fp8(quant.quantize_fp8(w2, "block")))


def test_int4_zero_point_keeps_zero_exact_and_fp16_zero_does_not():
    w = np.zeros((4, 256))
    w[:, 0], w[:, 1] = 1.0, -0.3
    assert np.all(quant.fake_quantize(w, C("int4", "group", 128, False, "int4"))[:, 2:] == 0)
    assert np.any(quant.fake_quantize(w, C("int4", "group", 128, False, "fp16"))[:, 2:128] != 0)


@pytest.mark.parametrize("bad", [C("int3", "group", 128), C("int4", "rows"), C("int4", "group", 0),
                                 C("int4", "group", 128, False, "none"), C("fp8", "channel", 0, False, "int4"),
                                 C("int4", "channel", scale_dtype="fp64"), C("int4", "channel", 0, True, "int4")])
def test_bad_choices_refused(bad):
    with pytest.raises(InputError):
        quant.fake_quantize(np.ones((4, 256)), bad)


def test_group_must_divide_k_and_explore_skips_it():
    with pytest.raises(InputError, match="divisible"):
        quant.fake_quantize(np.ones((4, 200)), C("int4", "group", 128))
    df = qe.explore(np.random.default_rng(0).standard_normal((8, 192)), qe.default_choices(("int4",)))
    assert set(df["size"][df["granularity"] == "group"]) == {32, 64}
    assert len(df) == 3 * 5  # tensor, channel, g32, g64, 128x128 blocks; sym + two zero storages


def test_generators_are_seeded_and_shaped():
    a = qe.make_weights("student-t", 64, 256, seed=5)
    assert a.shape == (64, 256) and np.array_equal(a, qe.make_weights("student-t", 64, 256, seed=5))
    kurt = float(np.mean(a**4) / np.mean(a**2) ** 2)
    assert kurt > 4  # heavy tails (a Gaussian's is 3)
    o = qe.make_weights("outliers", 64, 1000, seed=2, outliers="columns", rate=0.01, magnitude=50.0)
    assert int((np.abs(o).max(axis=0) > 0.02 * 10).sum()) == 10
    for kwargs in ({"dist": "uniform"}, {"N": 0}, {"dist": "outliers", "rate": 0.0},
                   {"dist": "outliers", "outliers": "diagonal"}, {"dist": "student-t", "df": 2.0}, {"std": -1.0}):
        with pytest.raises(InputError):
            qe.make_weights(**kwargs)


def test_load_npy_and_safetensors(tmp_path):
    w = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    assert np.array_equal(qe.load_matrix(tmp_path / "w.npy"), w.astype(np.float64))
    bits = quant.to_bf16_bits(w)
    header = {"__metadata__": {"format": "pt"},
              "a.weight": {"dtype": "F32", "shape": [8, 16], "data_offsets": [0, 512]},
              "b.weight": {"dtype": "BF16", "shape": [8, 16], "data_offsets": [512, 768]},
              "bias": {"dtype": "F32", "shape": [8], "data_offsets": [768, 800]}}
    blob = json.dumps(header).encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + w.tobytes() + bits.tobytes() + b"\0" * 32)
    assert np.array_equal(qe.load_matrix(path, "a.weight"), w.astype(np.float64))
    assert np.array_equal(qe.load_matrix(path, "b.weight"), quant.from_bf16_bits(bits).astype(np.float64))
    with pytest.raises(InputError, match="2-D tensors"):
        qe.load_matrix(path)  # two matrices: --tensor needed
    with pytest.raises(InputError, match="no tensor"):
        qe.load_matrix(path, "c.weight")


@pytest.mark.parametrize("content", [b"", b"\xff" * 8 + b"{}", (5).to_bytes(8, "little") + b"notjs",
                                     (2).to_bytes(8, "little") + b"[]"])
def test_broken_safetensors_refused(tmp_path, content):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(InputError):
        qe.load_matrix(path)


def test_bad_weight_files(tmp_path):
    np.save(tmp_path / "v.npy", np.ones(5))
    (tmp_path / "w.txt").write_text("1 2")
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}}).encode()
    (tmp_path / "short.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 60)
    for name in ("v.npy", "w.txt", "missing.npy", "short.safetensors"):
        with pytest.raises(InputError):
            qe.load_matrix(tmp_path / name)

"""CPU tests of the tensor-core kernels' W4A16 reorder, their tile choice and shape refusals."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kernels import registry
from kernels.quant import pack_tc, quant
from kernels.tensorcore import tensorcore
from models.errors import InputError


@pytest.mark.parametrize("N,K", [(128, 128), (256, 384), (384, 1024)])
def test_pack_codes_round_trip(N, K):
    q = quant.random_w4(N, K, 128, seed=N + K)
    words = pack_tc.pack_codes(q.codes)
    assert words.dtype == np.uint32 and words.size == N * K // 8
    assert np.array_equal(pack_tc.unpack_codes(words, N, K), q.codes)


def test_pack_matches_the_kernels_fragment_reads():
    """Every weight sits where the kernel's index and bit arithmetic looks for it."""
    N, K = 256, 384
    q = quant.random_w4(N, K, 128, seed=7)
    words = pack_tc.pack_codes(q.codes)
    for n in range(N):
        for k in range(0, K, 5):
            assert pack_tc.fragment_code(words, N, K, n, k) == q.codes[n, k], (n, k)


def test_pack_is_not_the_identity_layout():
    q = quant.random_w4(128, 256, 128, seed=3)
    assert not np.array_equal(pack_tc.pack_codes(q.codes), quant.pack_w4_reference(q.codes).reshape(-1))


def test_scale_zero_round_trip():
    q = quant.random_w4(256, 512, 128, seed=11)
    packed = pack_tc.pack_scale_zero(q.scales, q.zeros)
    assert packed.dtype == np.float16 and packed.size == 256 * 4 * 2
    s, z = pack_tc.unpack_scale_zero(packed, 256, 512)
    assert np.array_equal(s, q.scales) and np.array_equal(z, q.zeros)
    # block (nt=1, kt=2), warp 3, lane group 5, n-fragment 2 -> column 128 + 96 + 16 + 5
    entry = ((1 * 4 + 2) * 128 + (3 * 8 + 5) * 4 + 2) * 2
    assert packed[entry] == q.scales[128 + 96 + 16 + 5, 2] and packed[entry + 1] == q.zeros[128 + 96 + 16 + 5, 2]


def test_pack_w4_dequantizes_like_the_canonical_codes():
    w = np.random.default_rng(0).standard_normal((128, 256))
    q = quant.quantize_w4(w, 128)
    p = pack_tc.pack_w4(q)
    back = quant.W4(pack_tc.unpack_codes(p.words, 128, 256), *pack_tc.unpack_scale_zero(p.scale_zero, 128, 256), 128)
    assert np.array_equal(quant.dequantize_w4(back), quant.dequantize_w4(q))


@pytest.mark.parametrize("N,K,G", [(100, 128, 128), (128, 200, 128), (128, 256, 64)])
def test_pack_refuses_unsupported_shapes(N, K, G):
    with pytest.raises(InputError):
        pack_tc.check_tc_w4_shape(N, K, G)


@pytest.mark.parametrize("variant", [None, *tensorcore.VARIANTS])
@pytest.mark.parametrize("scheme", ["bf16", "fp16", "w4a16", "w8a8", "fp8"])
def test_tile_config_covers_every_batch(scheme, variant):
    for M in range(16, 257):
        cfg = tensorcore.tile_config(scheme, M, variant)
        assert cfg.bm * cfg.m_tiles >= M
        assert cfg.bm * (cfg.m_tiles - 1) < M  # no empty m-tile
        assert cfg.smem_bytes <= 227 * 1024
        assert cfg.threads in (128, 256)


def test_select_table_names_known_variants_and_falls_back_on_k():
    assert set(tensorcore.SELECT) == {"bf16", "fp16", "w4a16", "w8a8", "fp8"}
    for table in tensorcore.SELECT.values():
        assert [m for m, _ in table] == sorted(m for m, _ in table) and table[-1][0] >= 256
        assert all(v in tensorcore.VARIANTS for _, v in table)
    # 256-byte k-tiles need K * element bytes divisible by 256; 4160 bf16 = 8320 bytes is not
    chosen = tensorcore.select_variant("bf16", 16)
    if tensorcore.tile_config("bf16", 16, chosen).kt == 256:
        assert tensorcore.select_variant("bf16", 16, K=4160) == "narrow"
        assert tensorcore.select_variant("bf16", 16, K=4096) == chosen
    with pytest.raises(InputError):
        tensorcore.tile_config("bf16", 16, "v9")


def _cu_tables(name: str, macro: str) -> dict[str, list[tuple[int, ...]]]:
    """Entry tables of a .cu / .cuh per variant, from its #if defined(TC_X) [|| ...] / #elif / #else chain (the macro
    of each variant is its NVRTC option -DTC_X; #else is the variant without options)."""
    by_macro = {opt[2:]: name for name, v in tensorcore.VARIANTS.items() for opt in v.options}
    plain = next(name for name, v in tensorcore.VARIANTS.items() if not v.options)
    text = (Path(tensorcore.__file__).parent / name).read_text()
    lines = text[text.index("#if defined(TC_"):].splitlines()
    tables: dict[str, list[tuple[int, ...]]] = {}
    current: list[str] = []
    for raw in lines:
        line = raw.strip()
        if line.startswith(("#if defined(TC_", "#elif defined(TC_")):
            current = [by_macro[m] for m in re.findall(r"defined\((TC_\w+)\)", line)]
        elif line.startswith("#else"):
            current = [plain]
        elif line.startswith("#endif"):
            break
        elif line.startswith(macro + "("):
            args = line[len(macro) + 1:line.index(")")].split(",")
            row = tuple(int(a) for a in args if a.strip().isdigit())
            for v in current:
                tables.setdefault(v, []).append(row)
    return tables


def test_python_variant_table_matches_the_cuda_entries():
    byte_rows = _cu_tables("tc_gemm_bytes.cuh", "TC_BYTES_ENTRY")  # (BM, BN, WM, WN, STAGES, KT)
    w4_rows = _cu_tables("tc_gemm_w4a16.cu", "TC_W4_ENTRY")  # (BM, WM, KW, STAGES, EPI)
    assert sorted(byte_rows) == sorted(w4_rows) == sorted(tensorcore.VARIANTS)
    for name, var in tensorcore.VARIANTS.items():
        assert all(r[1] == tensorcore.BN for r in byte_rows[name])
        assert sorted((r[0], 32 * r[2] * r[3], r[4], r[5]) for r in byte_rows[name]) == sorted(
            (t.bm, 32 * t.warps, t.stages, t.kt) for t in var.byte_tiles.values())
        assert sorted((r[0], 4 * r[1] * r[2], r[3]) for r in w4_rows[name]) == sorted(
            (t.bm, t.warps, t.stages) for t in var.w4_tiles.values())


@pytest.mark.parametrize("variant", [v for v, var in tensorcore.VARIANTS.items() if var.options])
@pytest.mark.parametrize("source", ["tc_gemm_f16.cu", "tc_gemm_w8a8.cu", "tc_gemm_fp8.cu", "tc_gemm_w4a16.cu"])
def test_variant_entries_compile(source, variant):
    from kernels.toolchain import compile_check

    try:
        compile_check.nvrtc_library()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    if compile_check.cuda_include_dir() is None:
        pytest.skip("no CUDA headers")
    path = Path(tensorcore.__file__).parent / source
    r = compile_check.compile_source(path, "sm_90", tensorcore.VARIANTS[variant].options)
    assert r.ok, r.log


def test_grid_never_exceeds_the_iterations():
    assert tensorcore.grid_ctas(tiles_n=2, ktiles=3, m_tiles=1, sms=132, per_sm=2) == 6
    assert tensorcore.grid_ctas(tiles_n=172, ktiles=64, m_tiles=2, sms=132, per_sm=2) == 132


@pytest.mark.parametrize("spec", tensorcore.SPECS, ids=lambda s: s.name)
def test_runner_refuses_bad_shapes(spec):
    runner = tensorcore.make_runner(spec)
    runner.check(16, 4096, 4096)
    runner.check(1, 4096, 4096)  # any M from 1: rows past M are zero-filled
    for M, N, K in ((0, 4096, 4096), (257, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000), (16, 0, 4096)):
        with pytest.raises(InputError):
            runner.check(M, N, K)


def test_specs_are_registered():
    names = {s.name for s in registry.specs()}
    assert {s.name for s in tensorcore.SPECS} <= names
    fp8 = registry.get("tc_fp8")
    assert "NOT native" in fp8.notes and fp8.m_min == 1 and fp8.prefer_from == 16 and fp8.m_max == 256

"""`workbench import`: both layouts, every bad-file case (exit 2, one line, nothing written), re-import, provenance,
and public rows kept apart from our measurements. Fixture rows are made up here (plausible times), not copied."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from models.paths import data_dir as shipped_data_dir
from workbench.interfaces.cli import main
from workbench.storage.public import GEMM_DTYPES, ORIGIN, PUBLIC_COLUMNS, PUBLIC_KERNELS, load_public
from workbench.storage.store import load_measurements, write_points

WOQ = "trt_flow_/weight_only_quant_matmul_L257/PLUGIN_V2_WeightOnlyQuantMatmul_0"
SQ = "trt_flow_/smooth_quant_gemm_L96/PLUGIN_V2_SmoothQuantGemm_0"
SRC = "someone/bench@abc123:results.csv"


def csv_rows() -> list[dict]:
    return [
        dict(gpu="a100-sxm-80gb", scheme="bf16", M=1, N=4096, K=4096, time_s=2.5e-5, source=SRC,
             notes="vLLM 0.9.1 default bf16 linear; kernel_source=vllm_default; CUDA-graph replay avg; 6 weight "
                   "copies cycled"),
        dict(gpu="a100-sxm-80gb", scheme="w4a16", M=16, N=8192, K=4096, time_s=3.0e-5, source=SRC,
             notes="TRT-LLM 1.0.0 TRT engine, WeightOnlyQuantMatmul plugin int4 PER-CHANNEL (not group-128); "
                   f"kernel_source={WOQ}; TRT per-layer profiler time"),
        dict(gpu="l40s", scheme="w4a16", M=4, N=4096, K=4096, time_s=2.0e-5, source=SRC,
             notes=f"TRT-LLM 1.0.0 WeightOnlyQuantMatmul int4 g128; kernel_source={WOQ}; TRT per-layer profiler time"),
        dict(gpu="l40s", scheme="w8a8", M=64, N=4096, K=4096, time_s=4.0e-5, source=SRC,
             notes=f"TRT-LLM 1.0.0 SmoothQuantGemm plugin; kernel_source={SQ}; TRT per-layer profiler time"),
        dict(gpu="l40s", scheme="fp8", M=8, N=4096, K=4096, time_s=3.5e-5, source=SRC,
             notes="variant=fp8_block(1x128 act,128x128 W); TRT-LLM 1.3.0rc20 (act quant INCLUDED); "
                   "kernel_source=torch_flow; CUDA-graph replay avg"),
        dict(gpu="l40s", scheme="fp8", M=8, N=4096, K=4096, time_s=3.0e-5, source=SRC,
             notes="SGLang 0.5.14 sgl_per_token_quant_fp8 + fp8_scaled_mm (act quant INCLUDED); "
                   "kernel_source=sglang_sgl_kernel_fp8_scaled_mm; CUDA-graph replay avg"),
        dict(gpu="NVIDIA L40S", scheme="bf16", M=2, N=4096, K=4096, time_s=4.0e-5, source="", notes="my own timing"),
    ]


def aic_rows() -> list[dict]:
    base = dict(version="1.0.0", device="NVIDIA A100-SXM4-80GB", op_name="gemm", n=4096, k=4096)
    return [
        {**base, "framework": "TRTLLM", "kernel_source": "torch_flow", "gemm_dtype": "bfloat16", "m": 1,
         "latency": 0.025},
        {**base, "framework": "TRTLLM", "kernel_source": WOQ, "gemm_dtype": "int4_wo", "m": 1, "latency": 0.012},
        {**base, "framework": "TRTLLM", "kernel_source": WOQ, "gemm_dtype": "int8_wo", "m": 8, "latency": 0.016},
        {**base, "framework": "TRTLLM", "kernel_source": SQ, "gemm_dtype": "sq", "m": 32, "latency": 0.02},
        {**base, "framework": "TRTLLM", "kernel_source": "torch_flow", "gemm_dtype": "bfloat16", "m": 4096,
         "latency": 0.4},  # prefill-sized: left out by the default --max-batch 256
    ]


def write_csv(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def write_aic(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["import", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------------------- layouts
def test_csv_layout_maps_kernels_groups_act_quant_and_keeps_provenance(root, tmp_path, capsys):
    src = write_csv(tmp_path / "mine.csv", csv_rows())
    code, out, err = run(capsys, src, "--data", root)
    assert code == 0, err
    assert "imported 7 public rows (csv layout" in out and str(root / "public" / "mine.parquet") in out
    df = load_public(root)
    assert list(df.columns) == list(PUBLIC_COLUMNS) and len(df) == 7
    assert set(df["origin"]) == {ORIGIN}
    assert list(df["kernel"]) == ["cublas_bf16", "trtllm_wo_int4", "trtllm_wo_int4", "trtllm_sq_int8",
                                  "fp8_block_actq", "fp8_scaled_mm_actq", "cublas_bf16"]
    assert list(df["group_size"]) == [0, 4096, 128, 0, 128, 0, 0]  # per channel = K; g128; fp8 blocks of 128
    assert list(df["act_quant_included"]) == [False, False, False, False, True, True, False]
    assert list(df["framework"]) == ["vLLM", "TRT-LLM", "TRT-LLM", "TRT-LLM", "TRT-LLM", "SGLang", ""]
    assert list(df["framework_version"])[:2] == ["0.9.1", "1.0.0"]
    assert df["kernel_source"].iloc[1] == WOQ and df["timing"].iloc[1] == "TRT per-layer profiler time"
    assert df["timing"].iloc[0] == "CUDA-graph replay avg; 6 weight copies cycled"
    assert list(df["gpu"])[-1] == "l40s"  # a CUDA device name resolves to its catalogue key
    assert list(df["source"]) == [SRC] * 6 + [str(src)]  # a row without a source names the file it came from
    assert df["notes"].iloc[1].startswith("TRT-LLM 1.0.0 TRT engine") and set(df["imported_from"]) == {str(src)}
    assert df["time_s"].tolist() == [r["time_s"] for r in csv_rows()]


def test_csv_kernel_column_overrides_and_unknown_sources_become_library(root, tmp_path, capsys):
    rows = csv_rows()[:2]
    rows[0]["kernel"] = "cublaslt_fp8"
    rows[0]["scheme"] = "fp8"
    rows[1]["kernel"] = ""
    rows[1]["notes"] = "int4 per-channel; kernel_source=marlin"
    assert run(capsys, write_csv(tmp_path / "k.csv", rows), "--data", root)[0] == 0
    df = load_public(root)
    assert list(df["kernel"]) == ["cublaslt_fp8", "library:marlin"]
    assert df["group_size"].iloc[1] == 8192 // 2  # K of the row


def test_aiconfigurator_layout_ms_to_seconds_dtype_map_and_left_out_prefill(root, tmp_path, capsys):
    folder = tmp_path / "a100_sxm" / "gemm" / "trtllm" / "1.0.0"
    folder.mkdir(parents=True)
    src = write_aic(folder / "gemm_perf.parquet", aic_rows())
    code, out, err = run(capsys, src, "--data", root, "--source", "ai-dynamo/aiconfigurator@095f58a5:x")
    assert code == 0, err
    assert "left out 1 rows with M > 256" in out
    stored = root / "public" / "gemm_perf-a100-sxm-80gb-TRT-LLM-1.0.0.parquet"  # every table is gemm_perf.parquet
    assert stored.is_file()
    df = load_public(root)
    assert list(df["kernel"]) == ["cublas_bf16", "trtllm_wo_int4", "trtllm_wo_int8", "trtllm_sq_int8"]
    assert list(df["scheme"]) == ["bf16", "w4a16", "w8a16", "w8a8"]
    assert list(df["group_size"]) == [0, 4096, 4096, 0]
    assert df["time_s"].tolist() == pytest.approx([25e-6, 12e-6, 16e-6, 20e-6])
    assert set(df["gpu"]) == {"a100-sxm-80gb"} and set(df["framework"]) == {"TRT-LLM"}
    assert set(df["source"]) == {"ai-dynamo/aiconfigurator@095f58a5:x"}
    assert df["notes"].iloc[1] == "gemm_dtype=int4_wo; device=NVIDIA A100-SXM4-80GB; latency_ms=0.012"
    assert df["timing"].iloc[1].startswith("TensorRT engine, per-layer profiler")


def test_aiconfigurator_fp8_variants_and_blackwell_nvfp4(root, tmp_path, capsys):
    base = dict(version="0.5.14", device="NVIDIA B200", op_name="gemm", n=8192, k=8192, m=16, latency=0.03)
    rows = [{**base, "framework": "SGLang", "gemm_dtype": "fp8", "kernel_source": "sglang_sgl_kernel_fp8_scaled_mm"},
            {**base, "framework": "VLLM", "gemm_dtype": "fp8", "kernel_source": "vllm_default"},
            {**base, "framework": "VLLM", "gemm_dtype": "fp8_block", "kernel_source": "DeepGemmFp8BlockScaledMMKernel"},
            {**base, "framework": "SGLang", "gemm_dtype": "nvfp4", "kernel_source": "sglang_flashinfer_cutedsl_nvfp4"},
            {**base, "framework": "TRTLLM", "gemm_dtype": "fp8_static", "kernel_source": "torch_flow"}]
    assert run(capsys, write_aic(tmp_path / "gemm_perf.parquet", rows), "--data", root)[0] == 0
    df = load_public(root)
    assert list(df["kernel"]) == ["fp8_scaled_mm_actq", "library:vllm_default", "fp8_block_actq",
                                  "library:sglang_flashinfer_cutedsl_nvfp4", "library:torch_flow"]
    assert list(df["scheme"]) == ["fp8", "fp8", "fp8", "nvfp4", "fp8"]
    assert df["act_quant_included"].tolist()[:4] == [True, True, True, True]
    assert pd.isna(df["act_quant_included"].iloc[4])  # fp8_static: the source does not say
    assert (root / "public" / "gemm_perf-b200-SGLang-TRT-LLM-vLLM-0.5.14.parquet").is_file()


def test_every_kernel_the_mapping_names_is_a_declared_kernel():
    assert {r.kernel for r in GEMM_DTYPES.values() if r.kernel} <= set(PUBLIC_KERNELS)


# ---------------------------------------------------------------------------------------------------- bad files
def _csv_with(**change) -> list[dict]:
    rows = csv_rows()
    rows[3] = {**rows[3], **change}  # one bad row among good ones: nothing of the file may be imported
    return rows


BAD_CSV = {
    "unknown column": ([{**r, "speed": 1} for r in csv_rows()], "unknown column(s) speed"),
    "missing column": ([{k: v for k, v in r.items() if k != "time_s"} for r in csv_rows()], "lacks column(s) time_s"),
    "time <= 0": (_csv_with(time_s=0.0), "time <= 0"),
    "negative time": (_csv_with(time_s=-3e-5), "time <= 0"),
    "time not a number": (_csv_with(time_s="fast"), "time <= 0 or not a number"),
    "above 1 s": (_csv_with(time_s=2.5), "take more than 1 s"),
    "ms given as seconds": (_csv_with(N=16384, K=16384, time_s=3e-7), "faster than the datasheet bandwidth"),
    "gpu not in catalogue": (_csv_with(gpu="NVIDIA Imaginary 9000"), "GPU 'NVIDIA Imaginary 9000' is not in the"),
    "M zero": (_csv_with(M=0), "M must be a positive integer"),
    "M fractional": (_csv_with(M=1.5), "M must be a positive integer"),
    "K text": (_csv_with(K="4k"), "K must be a positive integer"),
    "unknown scheme": (_csv_with(scheme="int3"), "unknown scheme(s) 'int3'; accepted: fp32"),
    "unknown kernel": ([{**r, "kernel": "mystery"} for r in csv_rows()], "unknown kernel(s) 'mystery'"),
    "group does not divide K": (_csv_with(scheme="w4a16", K=4000, notes="int4 g128"), "not divisible by the group"),
}


@pytest.mark.parametrize("case", list(BAD_CSV))
def test_bad_csv_exit_2_one_line_nothing_written(case, root, tmp_path, capsys):
    rows, message = BAD_CSV[case]
    code, out, err = run(capsys, write_csv(tmp_path / "bad.csv", rows), "--data", root)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert not (root / "public").exists()


BAD_AIC = {
    "unknown dtype": ({"gemm_dtype": "int3_wo"}, "unknown gemm_dtype 'int3_wo'; accepted: bfloat16, float16"),
    "latency zero": ({"latency": 0.0}, "time <= 0"),
    "seconds as ms": ({"latency": 2000.0}, "take more than 1 s"),
    "unknown device": ({"device": "NVIDIA H999"}, "GPU 'NVIDIA H999' is not in the catalogue"),
    "m negative": ({"m": -1}, "m must be a positive integer"),
    "not a gemm": ({"op_name": "moe"}, "op_name 'moe' is not a GEMM"),
}


@pytest.mark.parametrize("case", list(BAD_AIC))
def test_bad_aiconfigurator_file_exit_2_and_the_previous_import_kept(case, root, tmp_path, capsys):
    good = write_aic(tmp_path / "gemm_perf.parquet", aic_rows())
    assert run(capsys, good, "--data", root)[0] == 0
    (stored,) = (root / "public").iterdir()
    before = stored.read_bytes()
    change, message = BAD_AIC[case]
    rows = aic_rows()
    rows[2] = {**rows[2], **change}
    code, out, err = run(capsys, write_aic(good, rows), "--data", root)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert list((root / "public").iterdir()) == [stored] and stored.read_bytes() == before


@pytest.mark.parametrize(("content", "name", "message"), [
    (b"not a table", "t.txt", "import reads .parquet"),
    (b"PAR1 garbage", "gemm_perf.parquet", "not a readable table"),
    (b"a,b\n1,2\n", "x.csv", "neither aiconfigurator's gemm_perf"),
    (b"gpu,scheme,M,N,K,time_s\n", "empty.csv", "no rows to import"),
])
def test_unreadable_or_foreign_files(content, name, message, root, tmp_path, capsys):
    (tmp_path / name).write_bytes(content)
    code, _, err = run(capsys, tmp_path / name, "--data", root)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (root / "public").exists()


def test_bad_options(root, tmp_path, capsys):
    src = write_csv(tmp_path / "mine.csv", csv_rows())
    assert "no such folder" in run(capsys, src, "--data", tmp_path / "nope")[2]
    assert "--max-batch 0 is out of range" in run(capsys, src, "--data", root, "--max-batch", "0")[2]
    assert "--name" in run(capsys, src, "--data", root, "--name", "///")[2]
    assert not (root / "public").exists()


# ---------------------------------------------------------------------------------------------------- storage
def test_reimport_replaces_the_same_files_rows(root, tmp_path, capsys):
    src = write_csv(tmp_path / "mine.csv", csv_rows())
    assert run(capsys, src, "--data", root)[0] == 0
    other = write_csv(tmp_path / "other.csv", csv_rows()[:1])
    assert run(capsys, other, "--data", root)[0] == 0
    write_csv(src, csv_rows()[:2])
    assert run(capsys, src, "--data", root)[0] == 0
    assert sorted(p.name for p in (root / "public").iterdir()) == ["mine.parquet", "other.parquet"]
    df = load_public(root)
    assert len(df) == 3 and df["imported_from"].value_counts().to_dict() == {str(src): 2, str(other): 1}


def test_load_public_on_an_empty_data_dir(root):
    df = load_public(root)
    assert df.empty and list(df.columns) == list(PUBLIC_COLUMNS)
    (root / "public").mkdir()
    assert load_public(root).empty


def test_public_rows_stay_out_of_our_measurements(root, tmp_path, capsys):
    assert run(capsys, write_csv(tmp_path / "mine.csv", csv_rows()), "--data", root)[0] == 0
    assert load_measurements(root).empty  # a data dir without measurements/: public/ is not read as measurements
    from tests.compare_fixtures import frame, point

    write_points(root / "measurements" / "sweep.parquet", frame([point("cublas_bf16", "bf16", 1, 13e-6)]))
    measured = load_measurements(root)
    assert len(measured) == 1 and "origin" not in measured.columns


def test_hypotheses_read_only_our_measurements(root, tmp_path, capsys):
    from tests.compare_fixtures import frame, point
    from workbench.analysis.hypotheses import evaluate_all

    (root / "hypotheses").mkdir()
    (root / "hypotheses" / "h.toml").write_text(
        '[[hypothesis]]\nid = "ok"\nkind = "speedup"\na = "w4a16"\nb = "bf16"\nbatch = [1]\nop = ">="\nvalue = 2\n')
    rows = [point("cublas_bf16", "bf16", 1, 13e-6, role="peer"), point("w4a16_gemv", "w4a16", 1, 4e-6)]
    write_points(root / "measurements" / "h200-sxm" / "sweep.parquet", frame(rows))
    before = evaluate_all(data_dir=root, measurements=load_measurements(root))
    assert run(capsys, write_csv(tmp_path / "mine.csv", csv_rows()), "--data", root)[0] == 0
    after = evaluate_all(data_dir=root, measurements=load_measurements(root))
    pd.testing.assert_frame_equal(before, after)
    assert set(after["gpu_key"].astype(str)) <= {"h200-sxm", ""}


def test_shipped_public_rows_carry_their_provenance():
    df = load_public(shipped_data_dir())
    assert len(df) == 1341 and set(df["gpu"]) == {"a100-sxm-80gb", "l40s"}
    assert df["source"].str.startswith("ai-dynamo/aiconfigurator@095f58a51c4c:").all()
    assert set(df["kernel"]) <= set(PUBLIC_KERNELS) and (df["time_s"] > 0).all()
    assert (df["notes"].str.len() > 0).all() and (df["framework"] != "").all()
    assert df.loc[df["scheme"] == "w4a16", "group_size"].eq(df.loc[df["scheme"] == "w4a16", "K"]).all()
    assert df.loc[df["scheme"] == "fp8", "act_quant_included"].all()


def test_every_stored_column_is_documented():
    text = (Path(__file__).resolve().parents[1] / "docs" / "columns.md").read_text()
    section = text[text.index("## Imported public timings"):]
    cells = {c.strip() for line in section.splitlines() if line.startswith("| ") for c in line.split("|")[1].split(",")}
    assert set(PUBLIC_COLUMNS) <= cells, set(PUBLIC_COLUMNS) - cells

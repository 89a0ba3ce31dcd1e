"""mma.sync tensor-core GEMMs (batch 16-256, stream-K): tensorcore.py's runners over tc_gemm_*.cu, their shared
headers tc_common.cuh and tc_gemm_bytes.cuh, and splitk.cuh (the split-K reduction wgmma uses too).
Declares SPECS (KernelSpec with facts), the tile VARIANTS and the per-scheme SELECT tables kept as data in one place."""

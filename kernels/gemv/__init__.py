"""CUDA-core GEMV-class kernels (batch 1-16): the optimized GEMVs of every scheme (gemv), the chapter's reference
kernels and the W4A16 production-tricks ladder (ladder), and the x-in-shared-memory arithmetic they share (xstage).
Each provider declares SPECS (KernelSpec with facts), its launch geometry and M bins; the .cu files sit beside."""

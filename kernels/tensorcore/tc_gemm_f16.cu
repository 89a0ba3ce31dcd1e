// bf16 / fp16 GEMM y = x . W^T on the tensor cores: mma.sync m16n8k16 with fp32 accumulation, cp.async pipeline,
// stream-K over (n-tile, k-tile). Entries tc_gemm_bf16_m{16,32,64,128} and tc_gemm_fp16_m{16,32,64,128}
// (BM = 16..128); the output has the input's type.
#include "tc_gemm_bytes.cuh"

struct OpBF16 {
  using Acc = float;
  template <int MF, int NF>
  __device__ __forceinline__ static void mma(float (&acc)[MF][NF][4], const unsigned (&a)[MF][4],
                                             const unsigned (&b)[NF][2]) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) tc::mma_bf16(acc[mf][nf], a[mf], b[nf][0], b[nf][1]);
  }
  __device__ __forceinline__ static void store(const tc::Params& p, int row, int col, float v0, float v1) {
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + static_cast<long long>(row) * p.N + col;
    *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
  }
};

struct OpFP16 {
  using Acc = float;
  template <int MF, int NF>
  __device__ __forceinline__ static void mma(float (&acc)[MF][NF][4], const unsigned (&a)[MF][4],
                                             const unsigned (&b)[NF][2]) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) tc::mma_f16(acc[mf][nf], a[mf], b[nf][0], b[nf][1]);
  }
  __device__ __forceinline__ static void store(const tc::Params& p, int row, int col, float v0, float v1) {
    __half* out = static_cast<__half*>(p.out) + static_cast<long long>(row) * p.N + col;
    *reinterpret_cast<__half2*>(out) = __floats2half2_rn(v0, v1);
  }
};

TC_BYTES_ENTRIES(tc_gemm_bf16, OpBF16)
TC_BYTES_ENTRIES(tc_gemm_fp16, OpFP16)

// W8A8 GEMM: int8 weights (per output channel scale) times int8 activations (per token scale) on the int8 tensor
// cores, mma.sync m16n8k32 s8 with int32 accumulation (split-K partials are summed exactly as int32);
// the epilogue applies y = acc * s_token[row] * s_channel[col] in fp32 and writes fp16.
// Entries tc_gemm_w8a8_m{16,32,64,128}.
#include "tc_gemm_bytes.cuh"

struct OpW8A8 {
  using Acc = int;
  template <int MF, int NF>
  __device__ __forceinline__ static void mma(int (&acc)[MF][NF][4], const unsigned (&a)[MF][4],
                                             const unsigned (&b)[NF][2]) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) tc::mma_s8(acc[mf][nf], a[mf], b[nf][0], b[nf][1]);
  }
  __device__ __forceinline__ static void store(const tc::Params& p, int row, int col, int v0, int v1) {
    const float s = p.sa[row];
    __half* out = static_cast<__half*>(p.out) + static_cast<long long>(row) * p.N + col;
    *reinterpret_cast<__half2*>(out) =
        __floats2half2_rn(static_cast<float>(v0) * s * p.sb[col], static_cast<float>(v1) * s * p.sb[col + 1]);
  }
};

TC_BYTES_ENTRIES(tc_gemm_w8a8, OpW8A8)

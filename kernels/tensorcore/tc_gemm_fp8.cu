// FP8 (e4m3) GEMM, honestly labelled: e4m3 weights and activations are converted to fp16 in registers and multiplied
// on the FP16 tensor cores (mma.sync m16n8k16, fp32 accumulation). This is not the native FP8 path: on sm_90 the
// fp8 mma.sync is emulated, and the native one (wgmma/QGMMA) is not used here. The FP16 ceiling applies.
//
// The conversion is exact and takes three integer ops per two values: e4m3 bits s.eeee.mmm placed as the fp16 bits
// s.0eeee.mmm0000000 give value * 2^-8 (normals and subnormals alike), so the product carries 2^-16, folded into the
// epilogue with the per-token and per-channel scales. Both operands are loaded as bytes with the same ldmatrix
// layout as the int8 kernel; the K order inside a 32-byte k-step is permuted identically for x and W, which leaves
// the dot product unchanged. Entries tc_gemm_fp8_m{16,32,64,128}; output fp16.
#include "tc_gemm_bytes.cuh"

// Bytes 0,1 (lo) and 2,3 (hi) of v as two fp16x2 holding e4m3 * 2^-8.
__device__ __forceinline__ void e4m3x4_to_h2(unsigned v, unsigned& lo, unsigned& hi) {
  const unsigned t0 = __byte_perm(v, 0u, 0x1404), t1 = __byte_perm(v, 0u, 0x3424);
  lo = (t0 & 0x80008000u) | ((t0 >> 1) & 0x3F803F80u);
  hi = (t1 & 0x80008000u) | ((t1 >> 1) & 0x3F803F80u);
}

struct OpFP8 {
  using Acc = float;
  template <int MF, int NF>
  __device__ __forceinline__ static void mma(float (&acc)[MF][NF][4], const unsigned (&a)[MF][4],
                                             const unsigned (&b)[NF][2]) {
    unsigned a1[MF][4], a2[MF][4], b1[NF][2], b2[NF][2];
#pragma unroll
    for (int mf = 0; mf < MF; ++mf) {
      e4m3x4_to_h2(a[mf][0], a1[mf][0], a1[mf][2]);
      e4m3x4_to_h2(a[mf][1], a1[mf][1], a1[mf][3]);
      e4m3x4_to_h2(a[mf][2], a2[mf][0], a2[mf][2]);
      e4m3x4_to_h2(a[mf][3], a2[mf][1], a2[mf][3]);
    }
#pragma unroll
    for (int nf = 0; nf < NF; ++nf) {
      e4m3x4_to_h2(b[nf][0], b1[nf][0], b1[nf][1]);
      e4m3x4_to_h2(b[nf][1], b2[nf][0], b2[nf][1]);
    }
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) {
        tc::mma_f16(acc[mf][nf], a1[mf], b1[nf][0], b1[nf][1]);
        tc::mma_f16(acc[mf][nf], a2[mf], b2[nf][0], b2[nf][1]);
      }
  }
  __device__ __forceinline__ static void store(const tc::Params& p, int row, int col, float v0, float v1) {
    const float s = p.sa[row] * 65536.0f;
    __half* out = static_cast<__half*>(p.out) + static_cast<long long>(row) * p.N + col;
    *reinterpret_cast<__half2*>(out) = __floats2half2_rn(v0 * s * p.sb[col], v1 * s * p.sb[col + 1]);
  }
};

TC_BYTES_ENTRIES(tc_gemm_fp8, OpFP8)

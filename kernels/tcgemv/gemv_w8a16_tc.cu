// W8A16 GEMV-class kernel on the tensor cores (batch M <= 8 NT): y[m][n] = s[n] sum_k x[m][k] q[n][k], with int8
// weights q (per-channel symmetric, one fp16 scale s[n] per output row, the W8A16 scheme of kernels/quant/quant.py),
// fp16 (W8_BF16 0) or bf16 (W8_BF16 1) activations and output, fp32 sums over all of K.
//
// The structure of gemv_q8_tc.cu's Q8_F16 path: the weights are the A operand of mma.sync m16n8k16 (16 channels per
// instruction) and the batch its N (8 rows per n-tile); each weight goes global -> registers of the one warp that
// needs it (no shared-memory stage), the warps of a CTA split the 64-wide K chunks and meet in shared memory.
//
// Layout (kernels/quant/pack_q8.py pack_w8a16_tc, offline): pack_q8_tc's fragment order with every byte stored as q ^ 0x80
// (= q + 128, unsigned): for row tile T, chunk c and k-step s (0, 1), lane (g = lane / 4, t = lane % 4) reads one
// 16-byte word set (ch g, k0..3), (ch g + 8, k0..3), (ch g, k0 + 4..7), (ch g + 8, k0 + 4..7), k0 = 64 c + 16 t + 8 s,
// lowest k lowest. Word pair (0, 1) is the first m16n8k16's A fragment at k0 .. k0 + 3 (its columns {2t, 2t+1} and
// {2t+8, 2t+9}), words (2, 3) the second's; x of batch row g at k = 64 c + 16 t .. + 15 (two 16-byte loads, one per
// k-step) gives their B fragments. The mma sums over k, so any k order A and B share is exact.
//
// int8 -> 16 bits in registers, exactly, per 4-byte word (4 weights):
//   fp16: prmt places byte u in the low byte of 0x64uu (= 1024 + u); one hsub2 of 1024 + 128 gives q (2 prmt +
//         2 hsub2 per word).
//   bf16: bf16 has 8 significant bits, too few for 2^k + u; prmt places u in the low byte of fp32 0x4B0000uu
//         (= 2^23 + u), one FADD of -(2^23 + 128) gives q in fp32, whose upper 16 bits are bf16(q) exactly; one
//         prmt packs two (4 prmt + 4 FADD + 2 prmt per word).
// The scale multiplies each output row's fp32 sum once, at the end.
//
// Geometry: a CTA owns TILES row tiles (each x fragment a warp loads serves all of them); its WARPS warps split the K
// chunks (warp w: chunks w, w + WARPS, ...), each loading U chunks of weights before the first mma. MINB caps the
// registers (__launch_bounds__) so that more CTAs fit on an SM.
#ifndef W8_BF16
#define W8_BF16 0  // 0: fp16 activations and output, 1: bf16
#endif
#ifndef TCW_NT
#define TCW_NT 1  // n-tiles of 8 batch rows: M <= 8 * NT
#endif
#ifndef TCW_WARPS
#define TCW_WARPS 8
#endif
#ifndef TCW_U
#define TCW_U 2
#endif
#ifndef TCW_TILES
#define TCW_TILES 1
#endif
#ifndef TCW_MINB
#define TCW_MINB 1
#endif

#include "tc_gemv_common.cuh"

constexpr int NT = TCW_NT, WARPS = TCW_WARPS, U = TCW_U, TILES = TCW_TILES;

#if W8_BF16
#define W8_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define W8_CVT "cvt.rn.bf16.f32"
#else
#define W8_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define W8_CVT "cvt.rn.f16.f32"
#endif

__device__ __forceinline__ void mma16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                      unsigned b1) {
  asm volatile(W8_MMA " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// One word of four biased bytes (u = q + 128, k0 .. k0 + 3, lowest k lowest) -> the 16-bit pairs {q0, q1}, {q2, q3}.
__device__ __forceinline__ void to_16(unsigned w, unsigned& lo, unsigned& hi) {
#if W8_BF16
  const float f0 = __uint_as_float(prmt(w, 0x4B000000u, 0x7650)) - 8388736.f;
  const float f1 = __uint_as_float(prmt(w, 0x4B000000u, 0x7651)) - 8388736.f;
  const float f2 = __uint_as_float(prmt(w, 0x4B000000u, 0x7652)) - 8388736.f;
  const float f3 = __uint_as_float(prmt(w, 0x4B000000u, 0x7653)) - 8388736.f;
  lo = prmt(__float_as_uint(f0), __float_as_uint(f1), 0x7632);
  hi = prmt(__float_as_uint(f2), __float_as_uint(f3), 0x7632);
#else
  lo = hsub2(prmt(w, 0x64646464u, 0x4140), 0x64806480u);  // (1024 + u0, 1024 + u1) - 1152
  hi = hsub2(prmt(w, 0x64646464u, 0x4342), 0x64806480u);
#endif
}

// What one warp needs to know about the problem and its place in the CTA.
struct Ctx {
  const uint4* W;
  const unsigned short* s;
  const unsigned short* x;
  unsigned short* y;
  int M, N, K, chunks, ntiles, warp, lane, g, t;
};

typedef uint4 Chunk[TILES][2];  // one chunk of weights of TILES row tiles: one 16-byte load per lane and k-step
typedef float Sums[TILES][NT][4];

// This lane's pointers at the chunk its warp takes next; the walk advances them by WARPS * U chunks a step, and item
// u of a step sits u * WARPS chunks further: compile-time offsets, no index arithmetic per load.
struct Ptrs {
  const uint4* w[TILES];  // row tile tile0 + r (tiles past N: the last): the lane's word of k-step 0
  const unsigned short* x[NT];  // batch row g + 8 j (past M: row M - 1, whose output column is never stored), k 16 t
};

// The weights of item u of the step, of row tiles tile0 .. tile0 + TILES - 1.
template <int u>
__device__ __forceinline__ void load_chunk(const Ptrs& q, Chunk& w) {
#pragma unroll
  for (int r = 0; r < TILES; ++r)
#pragma unroll
    for (int s = 0; s < 2; ++s) w[r][s] = ld_stream(q.w[r] + u * WARPS * 64 + 32 * s);
}

// acc += x[:, chunk] . W[tiles, chunk]^T for item u of the step.
template <int u>
__device__ __forceinline__ void compute_chunk(const Ptrs& q, Sums& acc, const Chunk& w) {
  unsigned a[TILES][2][8];  // per tile and k-step: {g lo, g hi, g+8 lo, g+8 hi} of k0..3, then of k0+4..7
#pragma unroll
  for (int r = 0; r < TILES; ++r)
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const unsigned words[4] = {w[r][s].x, w[r][s].y, w[r][s].z, w[r][s].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) to_16(words[q], a[r][s][2 * q], a[r][s][2 * q + 1]);
    }
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const uint4* src = reinterpret_cast<const uint4*>(q.x[j] + u * WARPS * 64);
    const uint4 xs[2] = {__ldg(src), __ldg(src + 1)};
#pragma unroll
    for (int r = 0; r < TILES; ++r)
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const unsigned* f = a[r][s];
        mma16(acc[r][j], f[0], f[2], f[1], f[3], xs[s].x, xs[s].y);  // k0 .. k0 + 3
        mma16(acc[r][j], f[4], f[6], f[5], f[7], xs[s].z, xs[s].w);  // k0 + 4 .. k0 + 7
      }
  }
}

__device__ __forceinline__ unsigned short to_out(float v) {
  unsigned short r;
  asm(W8_CVT " %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ float f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCW_MINB)
    gemv_w8a16_tc(const uint4* __restrict__ W, const unsigned short* __restrict__ s,
                  const unsigned short* __restrict__ x, unsigned short* __restrict__ y, int M, int N, int K) {
  const int lane = threadIdx.x & 31;
  const Ctx p{W, s, x, y, M, N, K, K >> 6, (N + 15) >> 4, (int)threadIdx.x >> 5, lane, lane >> 2, lane & 3};
  Sums acc;
  zero_sums(acc);
  const int tile0 = blockIdx.x * TILES;
  Ptrs q;
#pragma unroll
  for (int r = 0; r < TILES; ++r)
    q.w[r] = W + ((size_t)min(tile0 + r, p.ntiles - 1) * p.chunks + p.warp) * 64 + lane;
#pragma unroll
  for (int j = 0; j < NT; ++j) q.x[j] = x + (size_t)min(p.g + 8 * j, M - 1) * K + p.warp * 64 + 16 * p.t;
  // The warps' walk over the K chunks as split_k (tc_gemv_common.cuh): U chunks loaded per step before the first is
  // used; every warp takes the same number of steps.
  static_assert(TCW_U <= 4, "the walk unrolls at most 4 chunks per step");
  const int steps = (p.chunks + WARPS * U - 1) / (WARPS * U);
  for (int b = 0, c = p.warp; b < steps; ++b, c += WARPS * U) {
    Chunk w[U];
    if (c < p.chunks) load_chunk<0>(q, w[0]);
    if constexpr (U > 1) if (c + WARPS < p.chunks) load_chunk<1>(q, w[1]);
    if constexpr (U > 2) if (c + 2 * WARPS < p.chunks) load_chunk<2>(q, w[2]);
    if constexpr (U > 3) if (c + 3 * WARPS < p.chunks) load_chunk<3>(q, w[3]);
    if (c < p.chunks) compute_chunk<0>(q, acc, w[0]);
    if constexpr (U > 1) if (c + WARPS < p.chunks) compute_chunk<1>(q, acc, w[1]);
    if constexpr (U > 2) if (c + 2 * WARPS < p.chunks) compute_chunk<2>(q, acc, w[2]);
    if constexpr (U > 3) if (c + 3 * WARPS < p.chunks) compute_chunk<3>(q, acc, w[3]);
#pragma unroll
    for (int r = 0; r < TILES; ++r) q.w[r] += WARPS * U * 64;
#pragma unroll
    for (int j = 0; j < NT; ++j) q.x[j] += WARPS * U * 64;
  }
  reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, p.M, p.N, [&](int m, int n, float v) {
    p.y[(size_t)m * p.N + n] = to_out(v * f16_to_f32(p.s[n]));
  });
}

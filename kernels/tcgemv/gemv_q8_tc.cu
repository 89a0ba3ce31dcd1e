// arch: sm_89, sm_90
// 8-bit GEMV-class kernel on the tensor cores (batch M <= 8 NT): y[m][n] = sa[m] sb[n] sum_k x[m][k] W[n][k], with
// 8-bit weights and activations (Q8_S8 0: e4m3 x e4m3 -> fp32, the FP8 scheme; 1: s8 x s8 -> s32, W8A8), per-token
// sa and per-channel sb in fp32, fp16 output.
//
// As gemv_w4a16_tc.cu: the weights are the mma's A operand (16 channels per m16n8k32) and the batch its N (8 rows
// per n-tile), each weight goes global -> registers of the one warp that needs it (no shared-memory stage), and the
// warps of a CTA split K. There is nothing to dequantize: a 16-byte load of a lane is one A fragment as it lies in
// memory (e4m3 is converted to fp16 once, Q8_F16 below), and the sums run over the whole of K (the scales are per
// channel and per token, applied once per output).
//
// Layout (kernels/quant/pack_q8.py pack_q8_tc, offline): for row tile T (16 channels), 64-wide chunk c of K and k-step s
// (0, 1), lane (g = lane / 4, t = lane % 4) reads one 16-byte word set {channel g, channel g + 8} x {k0 .. k0 + 3,
// k0 + 4 .. k0 + 7} with k0 = 64 c + 16 t + 8 s: words (ch g, k0..3), (ch g+8, k0..3), (ch g, k0+4..7),
// (ch g+8, k0+4..7), one byte per k, lowest k lowest. The mma sums over k, so any k order A and B share is exact:
// lane t's A columns {4t..4t+3} / {16+4t..16+4t+3} of k-step s are those eight k, and its B fragment (x of batch row
// g at the same eight k) is two words of one 16-byte load of x (bytes 16 t .. 16 t + 15 of the chunk serve both
// k-steps).
//
// Q8_F16 1 (e4m3 only): each fragment is converted to fp16 once (cvt.rn.f16x2.e4m3x2, exact) and the products run
// on the f16 mma.sync m16n8k16, two per k-step: word pair (0, 1) of the A fragment is the first mma's rows g and
// g + 8 at k0 .. k0 + 3 (its columns {2t, 2t+1} and {2t+8, 2t+9}), words (2, 3) the second's, and x's words 2s, 2s+1
// their B fragments. The e4m3 mma.sync of sm_90 converts both of its operands at every instruction (measured slower
// than the s8 mma at the same bytes from M = 16 on, docs/kernels-tc-gemv.md); converting once saves the conversions
// of A repeated per n-tile and of B repeated per row tile.
//
// Geometry: a CTA owns TILES row tiles (each x fragment a warp loads serves all of them); its WARPS warps split the K
// chunks (warp w: chunks w, w + WARPS, ...), each loading U chunks of weights before the first mma; the warps' sums
// meet in shared memory. MINB caps the registers (__launch_bounds__) so that more CTAs fit on an SM.
#ifndef Q8_S8
#define Q8_S8 0  // 0: e4m3 (fp32 sums), 1: s8 (s32 sums)
#endif
#ifndef TCQ_NT
#define TCQ_NT 1  // n-tiles of 8 batch rows: M <= 8 * NT
#endif
#ifndef TCQ_WARPS
#define TCQ_WARPS 8
#endif
#ifndef TCQ_U
#define TCQ_U 2
#endif
#ifndef TCQ_TILES
#define TCQ_TILES 1
#endif
#ifndef TCQ_MINB
#define TCQ_MINB 1
#endif
#ifndef Q8_F16
#define Q8_F16 0  // 1: e4m3 converted to fp16 once per fragment, f16 mma (Q8_S8 0 only)
#endif
#if Q8_F16 && Q8_S8
#error "Q8_F16 converts e4m3 operands; the s8 kernel has nothing to convert"
#endif

#include "tc_gemv_common.cuh"

constexpr int NT = TCQ_NT, WARPS = TCQ_WARPS, U = TCQ_U, TILES = TCQ_TILES;

#if Q8_S8
typedef int Acc;
#define Q8_MMA "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
#define Q8_REG "r"
#else
typedef float Acc;
#define Q8_MMA "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
#define Q8_REG "f"
#endif

__device__ __forceinline__ void mma_q8(Acc* c, const uint4& a, unsigned b0, unsigned b1) {
  asm volatile(Q8_MMA " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+" Q8_REG(c[0]), "+" Q8_REG(c[1]), "+" Q8_REG(c[2]), "+" Q8_REG(c[3])
               : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned short v) {
  unsigned d;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(v));
  return d;
}

// Two e4m3 words (4 k each, lowest k lowest) -> f16x2 pairs {k0, k1}, {k2, k3}.
__device__ __forceinline__ void to_f16(unsigned w, unsigned& lo, unsigned& hi) {
  lo = e4m3x2_to_f16x2(static_cast<unsigned short>(w & 0xffffu));
  hi = e4m3x2_to_f16x2(static_cast<unsigned short>(w >> 16));
}

// What one warp needs to know about the problem and its place in the CTA.
struct Ctx {
  const uint4* W;
  const unsigned char* x;
  const float* sa;
  const float* sb;
  unsigned short* y;
  int M, N, K, chunks, ntiles, warp, lane, g, t;
};

typedef uint4 Chunk[TILES][2];  // one chunk of weights of TILES row tiles: one 16-byte load per lane and k-step
typedef Acc Sums[TILES][NT][4];

// The weights of chunk c of row tiles tile0 .. tile0 + TILES - 1 (tiles past N read the last tile; c past K: none).
__device__ __forceinline__ void load_chunk(const Ctx& p, Chunk& w, int tile0, int c) {
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    const size_t base = ((size_t)min(tile0 + r, p.ntiles - 1) * p.chunks + c) * 64 + p.lane;
#pragma unroll
    for (int s = 0; s < 2; ++s)
      if (c < p.chunks) w[r][s] = ld_stream(p.W + base + s * 32);
  }
}

// x of batch row g + 8 j at k = 64 c + 16 t .. + 15 (both k-steps of the chunk); zeros past M.
__device__ __forceinline__ uint4 load_x(const Ctx& p, int j, int c) {
  const int m = p.g + 8 * j;
  if (m >= p.M) return make_uint4(0, 0, 0, 0);
  return __ldg(reinterpret_cast<const uint4*>(p.x + (size_t)m * p.K + (size_t)c * 64 + 16 * p.t));
}

// acc += x[rows, chunk c] . W[tiles, chunk c]^T, x_at(j) giving the 16 bytes of n-tile j's x row of this lane (the
// dense kernel's rows g + 8 j, the grouped kernel's routed rows).
template <class XAt>
__device__ __forceinline__ void mma_chunk(Sums& acc, const Chunk& w, XAt x_at) {
#if Q8_F16
  unsigned a[TILES][2][8];  // per tile and k-step: the f16 A fragments of its two m16n8k16
#pragma unroll
  for (int r = 0; r < TILES; ++r)
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const unsigned words[4] = {w[r][s].x, w[r][s].y, w[r][s].z, w[r][s].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) to_f16(words[q], a[r][s][2 * q], a[r][s][2 * q + 1]);
    }
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const uint4 xb = x_at(j);
    const unsigned xw[4] = {xb.x, xb.y, xb.z, xb.w};
    unsigned b[8];
#pragma unroll
    for (int q = 0; q < 4; ++q) to_f16(xw[q], b[2 * q], b[2 * q + 1]);
#pragma unroll
    for (int r = 0; r < TILES; ++r)
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const unsigned* f = a[r][s];  // {g lo, g hi, g+8 lo, g+8 hi} of k0..3, then of k0+4..7
        const unsigned a0[4] = {f[0], f[2], f[1], f[3]}, a1[4] = {f[4], f[6], f[5], f[7]};
        mma_f16(acc[r][j], a0, b[4 * s], b[4 * s + 1]);
        mma_f16(acc[r][j], a1, b[4 * s + 2], b[4 * s + 3]);
      }
  }
#else
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const uint4 xb = x_at(j);
#pragma unroll
    for (int r = 0; r < TILES; ++r) {
      mma_q8(acc[r][j], w[r][0], xb.x, xb.y);
      mma_q8(acc[r][j], w[r][1], xb.z, xb.w);
    }
  }
#endif
}

// acc += x[:, chunk c] . W[tiles, chunk c]^T.
__device__ __forceinline__ void compute_chunk(const Ctx& p, Sums& acc, const Chunk& w, int c) {
  mma_chunk(acc, w, [&](int j) { return load_x(p, j, c); });
}

__device__ __forceinline__ unsigned short f32_to_f16(float v) {
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}

// The sums across warps, scaled per token and channel, stored as fp16.
__device__ __forceinline__ void reduce_store(const Ctx& p, const Sums& acc, int tile0) {
  reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, p.M, p.N, [&](int m, int n, Acc v) {
    p.y[(size_t)m * p.N + n] = f32_to_f16(static_cast<float>(v) * p.sa[m] * p.sb[n]);
  });
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCQ_MINB)
    gemv_q8_tc(const uint4* __restrict__ W, const float* __restrict__ sb, const unsigned char* __restrict__ x,
               const float* __restrict__ sa, unsigned short* __restrict__ y, int M, int N, int K) {
  const int lane = threadIdx.x & 31;
  const Ctx p{W, x, sa, sb, y, M, N, K, K >> 6, (N + 15) >> 4, (int)threadIdx.x >> 5, lane, lane >> 2, lane & 3};
  Sums acc;
  zero_sums(acc);
  const int tile0 = blockIdx.x * TILES;
  split_k<WARPS, U, Chunk>(p.chunks, p.warp, [&](Chunk& w, int c) { load_chunk(p, w, tile0, c); },
                           [&](const Chunk& w, int c) { compute_chunk(p, acc, w, c); });
  reduce_store(p, acc, tile0);
}

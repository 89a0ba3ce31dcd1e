// arch: sm_80, sm_90
// 16-bit GEMV-class kernel on the tensor cores (batch M <= 8 NT): y[M,N] = x[M,K] . W[N,K]^T with bf16 (F16_BF16 1)
// or fp16 weights and activations, fp32 sums over all of K, output in the input type.
//
// As gemv_w4a16_tc.cu and gemv_q8_tc.cu: the weights are the mma's A operand (16 channels per m16n8k16) and the batch
// its N (8 rows per n-tile), each weight goes from global memory straight into the registers of the one warp that
// needs it (no shared-memory stage), and the warps of a CTA split K. There is nothing to convert.
//
// Fragment order: the mma sums over k, so any k order A and B share is exact. For row tile T (16 channels) and
// 64-wide chunk c of K, lane (g = lane / 4, t = lane % 4) takes four 16-byte words j = 2 h + e (h, e = 0, 1): the
// eight weights of channel 16 T + g + 8 e at k = 64 c + 32 h + 8 t .. + 7. k-step s = 2 h + q takes the words'
// elements 4 q .. 4 q + 3: lane t's A columns {2t, 2t+1} / {2t+8, 2t+9} are physical k (64 c + 32 h + 8 t + 4 q) +
// {0, 1} / {2, 3}, and its B fragment is x of batch row g at the same four k (two 16-byte loads of x per chunk and
// n-tile serve all four k-steps).
// Layout (kernels/tcgemv/tc_gemv_f16.py pack_f16_tc, offline; the same bytes as the row-major N x K array, reordered): word
// j of lane L of chunk c of tile T at 16-byte index ((T * chunks + c) * 4 + j) * 32 + L, so every load of a warp
// reads 512 contiguous bytes and a row tile's weights are one contiguous run (with the row-major array itself each
// load touched 8 channels' rows: 1.15-1.26x the read limit on the large layers, docs/kernels-tc-gemv.md). Channels
// past N are zeros of the padding; tiles past N read the last tile (their sums are not stored).
//
// Geometry: a CTA owns TILES row tiles (each x fragment a warp loads serves all of them); its WARPS warps split the K
// chunks (warp w: chunks w, w + WARPS, ...), each loading U chunks of weights before the first mma; the warps' sums
// meet in shared memory. MINB caps the registers (__launch_bounds__) so that more CTAs fit on an SM.
#ifndef F16_BF16
#define F16_BF16 1  // 1: bf16 operands and output, 0: fp16
#endif
#ifndef TCF_NT
#define TCF_NT 1  // n-tiles of 8 batch rows: M <= 8 * NT
#endif
#ifndef TCF_WARPS
#define TCF_WARPS 8
#endif
#ifndef TCF_U
#define TCF_U 1
#endif
#ifndef TCF_TILES
#define TCF_TILES 1
#endif
#ifndef TCF_MINB
#define TCF_MINB 1
#endif

#include "tc_gemv_common.cuh"

constexpr int NT = TCF_NT, WARPS = TCF_WARPS, U = TCF_U, TILES = TCF_TILES;

#if F16_BF16
#define F16_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define F16_CVT "cvt.rn.bf16.f32"
#else
#define F16_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define F16_CVT "cvt.rn.f16.f32"
#endif

__device__ __forceinline__ void mma16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                      unsigned b1) {
  asm volatile(F16_MMA " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// What one warp needs to know about the problem and its place in the CTA.
struct Ctx {
  const uint4* W;
  const unsigned short* x;
  unsigned short* y;
  int M, N, K, chunks, ntiles, warp, lane, g, t;
};

typedef uint4 Chunk[TILES][4];  // per row tile: word j = 2 h + e (channel g + 8 e, k 32 h + 8 t .. + 7)
typedef float Sums[TILES][NT][4];

// The weights of chunk c of row tiles tile0 .. tile0 + TILES - 1 (tiles past N read the last tile; c past K: none).
__device__ __forceinline__ void load_chunk(const Ctx& p, Chunk& w, int tile0, int c) {
  if (c >= p.chunks) return;
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    const uint4* src = p.W + ((size_t)min(tile0 + r, p.ntiles - 1) * p.chunks + c) * 128 + p.lane;
#pragma unroll
    for (int j = 0; j < 4; ++j) w[r][j] = ld_stream(src + 32 * j);
  }
}

// acc += x[:, chunk c] . W[tiles, chunk c]^T.
__device__ __forceinline__ void compute_chunk(const Ctx& p, Sums& acc, const Chunk& w, int c) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int m = min(p.g + 8 * j, p.M - 1);  // a row past M reads row M - 1: its output column is never stored
    const uint4* src = reinterpret_cast<const uint4*>(p.x + (size_t)m * p.K + (size_t)c * 64 + 8 * p.t);
    const uint4 xs[2] = {__ldg(src), __ldg(src + 4)};
#pragma unroll
    for (int r = 0; r < TILES; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 lo = w[r][2 * h], hi = w[r][2 * h + 1];  // channels g and g + 8
        mma16(acc[r][j], lo.x, hi.x, lo.y, hi.y, xs[h].x, xs[h].y);  // q = 0: elements 0..3
        mma16(acc[r][j], lo.z, hi.z, lo.w, hi.w, xs[h].z, xs[h].w);  // q = 1: elements 4..7
      }
  }
}

__device__ __forceinline__ unsigned short to_out(float v) {
  unsigned short r;
  asm(F16_CVT " %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCF_MINB)
    gemv_f16_tc(const uint4* __restrict__ W, const unsigned short* __restrict__ x,
                unsigned short* __restrict__ y, int M, int N, int K) {
  const int lane = threadIdx.x & 31;
  const Ctx p{W, x, y, M, N, K, K >> 6, (N + 15) >> 4, (int)threadIdx.x >> 5, lane, lane >> 2, lane & 3};
  Sums acc;
  zero_sums(acc);
  const int tile0 = blockIdx.x * TILES;
  split_k<WARPS, U, Chunk>(p.chunks, p.warp, [&](Chunk& w, int c) { load_chunk(p, w, tile0, c); },
                           [&](const Chunk& w, int c) { compute_chunk(p, acc, w, c); });
  reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, p.M, p.N,
                                 [&](int m, int n, float v) { p.y[(size_t)m * p.N + n] = to_out(v); });
}

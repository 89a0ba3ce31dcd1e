// W4A16 GEMV-class kernel on the FP16 tensor cores (batch M <= 16): y[M,N] = x[M,K] . dequant(W)[N,K]^T, int4
// weights in groups of G along K (fp16 scale and zero per group), fp16 activations, fp32 accumulation, fp16 output.
//
// The weights are the mma's A operand (16 output channels per m16n8k16) and the batch its N (8 per n-tile), so one
// dequantized weight serves up to 8 (NT = 1) or 16 (NT = 2) batch rows for the price of one: the products leave the
// CUDA cores, which then only convert codes. Each weight is used once, so it goes from global memory straight into
// the registers of the one warp that needs it: no shared-memory stage, no cp.async pipeline.
//
// Layout (kernels/quant/pack_w4.py pack_w4_tc, offline): for row tile T (16 channels) and 64-wide chunk c of K, lane
// (g = lane / 4, t = lane % 4) reads one 16-byte word set: word s (k-step s = 0..3) holds the codes of channels
// 16 T + g (+ 8) at k = 64 c + 16 t + 4 s + {0, 1, 2, 3}. The mma sums over k, so any k order that A and B share is
// exact: lane t's A columns {2t, 2t+1, 2t+8, 2t+9} of k-step s are those four k, and its B fragment (x of batch row
// g, the same four k) is two half2 of a contiguous 16-element slice of x, read with two 16-byte loads per chunk.
// Nibbles: bits 0-3 / 16-19 channel g at k+0 / k+1, bits 8-11 / 24-27 channel g+8 at k+0 / k+1 (lop3 with 0x000F000F
// of w and of w >> 8 gives 1024 + q: one hsub2 with (1024 + z) leaves q - z exactly); bits 4-7 / 20-23 and 12-15 /
// 28-31 the same at k+2 / k+3 (the mask 0x00F000F0 gives 1024 + 16 q: one hfma2 by 1/16 and -(64 + z)).
// So a 32-bit word is one mma's A fragment: 1 shift, 4 lop3, 4 half2 ops per 8 weights, and no product on CUDA cores.
// Scales: SZ uint32 [tiles, K/G, 16] (low half fp16 s, high half fp16 1024 + z): the 16 channels of a tile and group
// side by side. WSCALE 0: the mma sums (q - z) x exactly per group in fp32 and the fp32 sums take the scale (4 FFMA
// per n-tile, group and lane); WSCALE 1: one hmul2 by the scale per register (the weight rounded once to fp16, as
// the GEMMs do) and the mma accumulates the output directly: half the accumulator registers, for more row tiles.
//
// Geometry: a CTA owns TILES row tiles (the x fragments a warp loads serve all of them); its WARPS warps split the K
// groups (warp w: groups w, w + WARPS, ...), each loading U groups' weights (U * G / 64 16-byte loads per lane and
// tile) before the first is converted; the warps' sums meet in shared memory and are stored as fp16. Grid: one CTA
// per TILES row tiles. MINB caps the registers (__launch_bounds__) so that more CTAs fit on an SM.
#include <cuda_fp16.h>

#include "tc_gemv_common.cuh"

#ifndef TCG_NT
#define TCG_NT 1  // n-tiles of 8 batch rows: M <= 8 * NT
#endif
#ifndef TCG_WARPS
#define TCG_WARPS 8
#endif
#ifndef TCG_U
#define TCG_U 4
#endif
#ifndef TCG_TILES
#define TCG_TILES 1
#endif
#ifndef TCG_WSCALE
#define TCG_WSCALE 0  // 1: the scale multiplies the converted weights (fp16) and the mma accumulates the output
#endif
#ifndef TCG_MINB
#define TCG_MINB 1  // __launch_bounds__ minimum blocks per SM (caps the registers)
#endif
#ifndef W4_GROUP
#define W4_GROUP 128
#endif

constexpr int NT = TCG_NT, WARPS = TCG_WARPS, U = TCG_U, TILES = TCG_TILES, CPG = W4_GROUP / 64;
static_assert(W4_GROUP % 64 == 0, "the group must be a multiple of 64 (one k-chunk of the layout)");

// (1024 + z) of channel g in both halves, and -(64 + z) for the high-nibble pairs.
struct Zero {
  unsigned lo, hi;
  Zero() = default;
  __device__ __forceinline__ explicit Zero(unsigned sz) {
    asm("prmt.b32 %0, %1, %1, 0x3232;" : "=r"(lo) : "r"(sz));
    hi = hsub2(0x63806380u, lo);  // 960 - (1024 + z)
  }
};

// One word -> one A fragment of q - z: {ch g k+0/1, ch g+8 k+0/1, ch g k+2/3, ch g+8 k+2/3}.
__device__ __forceinline__ void dequant(unsigned (&a)[4], unsigned w, const Zero& z0, const Zero& z8) {
  const unsigned sixteenth = 0x2c002c00u;  // half2(1/16, 1/16)
  const unsigned v = w >> 8;
  a[0] = hsub2(lop3_and_or(w, 0x000F000Fu, 0x64006400u), z0.lo);
  a[1] = hsub2(lop3_and_or(v, 0x000F000Fu, 0x64006400u), z8.lo);
  a[2] = hfma2(lop3_and_or(w, 0x00F000F0u, 0x64006400u), sixteenth, z0.hi);
  a[3] = hfma2(lop3_and_or(v, 0x00F000F0u, 0x64006400u), sixteenth, z8.hi);
}

__device__ __forceinline__ float lo_half(unsigned sz) { return __half2float(__ushort_as_half((unsigned short)sz)); }

// What one warp needs to know about the problem and its place in the CTA (kernels/grouped/grouped_w4_tc.cu walks
// with it; the dense kernel below carries Ptrs instead).
struct Ctx {
  const uint4* W;
  const unsigned* SZ;
  const __half* x;
  __half* y;
  int M, N, K, chunks, groups, ntiles, warp, lane, g, t;
};

// This lane's pointers at the group its warp takes next; the walk (main) advances them by WARPS * U groups a step,
// and item u of a step sits u * WARPS groups further: compile-time offsets, so no index arithmetic per load.
struct Ptrs {
  const uint4* w[TILES];      // row tile tile0 + r (tiles past N: the last): the lane's 16-byte word of chunk 0
  const unsigned* sz[TILES];  // its (scale, zero) word of channel g (g + 8: + 8)
  const __half* x[NT];        // batch row g + 8 j (rows past M: row M - 1; their outputs are never stored) at k 16 t
};

struct Group {  // one group of TILES row tiles: one 16-byte load of weights per lane and chunk, and the (scale,
  uint4 w[TILES][CPG];  // zero) words of channels g and g + 8, loaded with the weights (not when they are converted:
  unsigned sz0[TILES], sz8[TILES];  // 1-3 % faster at M <= 8 on the large layers, docs/kernels-tc-gemv.md)
};
typedef float Acc[TILES][NT][4];

// The weights, scales and zeros of group grp of row tiles tile0 .. tile0 + TILES - 1 (tiles past N read the last tile;
// grp past K: none): the grouped kernel's load.
__device__ __forceinline__ void load_group(const Ctx& p, Group& w, int tile0, int grp) {
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    const size_t base = ((size_t)min(tile0 + r, p.ntiles - 1) * p.chunks + (size_t)grp * CPG) * 32 + p.lane;
#pragma unroll
    for (int c = 0; c < CPG; ++c)
      if (grp < p.groups) w.w[r][c] = ld_stream(p.W + base + c * 32);
    if (grp < p.groups) {
      const unsigned* sz = p.SZ + ((size_t)min(tile0 + r, p.ntiles - 1) * p.groups + grp) * 16;
      w.sz0[r] = __ldg(sz + p.g);
      w.sz8[r] = __ldg(sz + p.g + 8);
    }
  }
}

// The weights, scales and zeros of item u of the step (the group u * WARPS past q's) of the CTA's row tiles.
template <int u>
__device__ __forceinline__ void load_group(const Ptrs& q, Group& w) {
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
#pragma unroll
    for (int c = 0; c < CPG; ++c) w.w[r][c] = ld_stream(q.w[r] + (u * WARPS * CPG + c) * 32);
    w.sz0[r] = __ldg(q.sz[r] + u * WARPS * 16);
    w.sz8[r] = __ldg(q.sz[r] + u * WARPS * 16 + 8);
  }
}

// acc += x[:, group] . dequant(w)^T for the TILES row tiles, the group item u of the step.
template <int u>
__device__ __forceinline__ void compute_group(const Ptrs& q, Acc& acc, const Group& w) {
#if TCG_WSCALE
  Acc& part = acc;  // the mma accumulates the output; the scale is in the weights
  unsigned sh0[TILES], sh8[TILES];
#else
  Acc part;
#endif
  Zero z0[TILES], z8[TILES];
#if !TCG_WSCALE
  float s0[TILES], s8[TILES];
#endif
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    const unsigned a = w.sz0[r], b8 = w.sz8[r];
    z0[r] = Zero(a);
    z8[r] = Zero(b8);
#if TCG_WSCALE
    asm("prmt.b32 %0, %1, %1, 0x1010;" : "=r"(sh0[r]) : "r"(a));
    asm("prmt.b32 %0, %1, %1, 0x1010;" : "=r"(sh8[r]) : "r"(b8));
#else
    s0[r] = lo_half(a);
    s8[r] = lo_half(b8);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) part[r][j][i] = 0.f;
#endif
  }
#pragma unroll
  for (int c = 0; c < CPG; ++c) {
    // x of batch rows g + 8 j at k = 64 (group CPG + c) + 16 t .. + 15: eight half2.
    unsigned xb[NT][8];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint4* src = reinterpret_cast<const uint4*>(q.x[j] + (u * WARPS * CPG + c) * 64);
      const uint4 lo = __ldg(src), hi = __ldg(src + 1);
      xb[j][0] = lo.x; xb[j][1] = lo.y; xb[j][2] = lo.z; xb[j][3] = lo.w;
      xb[j][4] = hi.x; xb[j][5] = hi.y; xb[j][6] = hi.z; xb[j][7] = hi.w;
    }
#pragma unroll
    for (int r = 0; r < TILES; ++r) {
      const unsigned words[4] = {w.w[r][c].x, w.w[r][c].y, w.w[r][c].z, w.w[r][c].w};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        unsigned a[4];
        dequant(a, words[s], z0[r], z8[r]);
#if TCG_WSCALE
        a[0] = hmul2(a[0], sh0[r]);
        a[1] = hmul2(a[1], sh8[r]);
        a[2] = hmul2(a[2], sh0[r]);
        a[3] = hmul2(a[3], sh8[r]);
#endif
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_f16(part[r][j], a, xb[j][2 * s], xb[j][2 * s + 1]);
      }
    }
  }
#if !TCG_WSCALE
#pragma unroll
  for (int r = 0; r < TILES; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      acc[r][j][0] = fmaf(s0[r], part[r][j][0], acc[r][j][0]);
      acc[r][j][1] = fmaf(s0[r], part[r][j][1], acc[r][j][1]);
      acc[r][j][2] = fmaf(s8[r], part[r][j][2], acc[r][j][2]);
      acc[r][j][3] = fmaf(s8[r], part[r][j][3], acc[r][j][3]);
    }
#endif
}

// The sums across warps, stored as fp16.
__device__ __forceinline__ void reduce_store(const Ctx& p, const Acc& acc, int tile0) {
  reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, p.M, p.N,
                                 [&](int m, int n, float v) { p.y[(size_t)m * p.N + n] = __float2half_rn(v); });
}

__device__ __forceinline__ Ctx make_ctx(const uint4* W, const unsigned* SZ, const __half* x, __half* y, int M, int N,
                                        int K) {
  const int lane = threadIdx.x & 31;
  return Ctx{W, SZ, x, y, M, N, K, K >> 6, K / W4_GROUP, (N + 15) >> 4, (int)threadIdx.x >> 5, lane, lane >> 2,
             lane & 3};
}

// The lane's pointers at its warp's first group (group `warp`).
__device__ __forceinline__ Ptrs first_ptrs(const uint4* W, const unsigned* SZ, const __half* x, int M, int N, int K,
                                          int tile0, int warp, int lane) {
  const int ntiles = (N + 15) >> 4, groups = K / W4_GROUP;
  Ptrs q;
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    const size_t tile = min(tile0 + r, ntiles - 1);
    q.w[r] = W + (tile * (size_t)(K >> 6) + (size_t)warp * CPG) * 32 + lane;
    q.sz[r] = SZ + (tile * (size_t)groups + warp) * 16 + (lane >> 2);
  }
#pragma unroll
  for (int j = 0; j < NT; ++j)
    q.x[j] = x + (size_t)min((lane >> 2) + 8 * j, M - 1) * K + warp * CPG * 64 + 16 * (lane & 3);
  return q;
}

// Item u of every step: group b * WARPS * U + warp + u * WARPS, if it exists (load, then convert and multiply).
template <int u>
__device__ __forceinline__ void load_item(const Ptrs& q, Group (&w)[U], bool here) {
  if constexpr (u < U) {
    if (here) load_group<u>(q, w[u]);
  }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCG_MINB)
    gemv_w4a16_tc(const uint4* __restrict__ W, const unsigned* __restrict__ SZ, const __half* __restrict__ x,
                  __half* __restrict__ y, int M, int N, int K) {
  const Ctx p = make_ctx(W, SZ, x, y, M, N, K);
  const int tile0 = blockIdx.x * TILES, groups = p.groups, warp = p.warp;
  Ptrs q = first_ptrs(W, SZ, x, M, N, K, tile0, warp, p.lane);
  Acc acc;
  zero_sums(acc);
  // The warps' walk over the K groups as split_k (tc_gemv_common.cuh): U groups loaded per step before the first is
  // converted; every warp takes the same number of steps.
  const int steps = (groups + WARPS * U - 1) / (WARPS * U);
  for (int b = 0, grp = warp; b < steps; ++b, grp += WARPS * U) {
    Group w[U];
    static_assert(U <= 4, "the walk unrolls at most 4 groups per step");
    load_item<0>(q, w, grp < groups);
    load_item<1>(q, w, grp + WARPS < groups);
    load_item<2>(q, w, grp + 2 * WARPS < groups);
    load_item<3>(q, w, grp + 3 * WARPS < groups);
    if (grp < groups) compute_group<0>(q, acc, w[0]);
    if constexpr (U > 1) if (grp + WARPS < groups) compute_group<1>(q, acc, w[1]);
    if constexpr (U > 2) if (grp + 2 * WARPS < groups) compute_group<2>(q, acc, w[2]);
    if constexpr (U > 3) if (grp + 3 * WARPS < groups) compute_group<3>(q, acc, w[3]);
#pragma unroll
    for (int r = 0; r < TILES; ++r) q.w[r] += WARPS * U * CPG * 32, q.sz[r] += WARPS * U * 16;
#pragma unroll
    for (int j = 0; j < NT; ++j) q.x[j] += WARPS * U * CPG * 64;
  }
  reduce_store(p, acc, tile0);
}

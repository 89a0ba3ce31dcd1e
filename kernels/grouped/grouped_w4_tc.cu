// arch: sm_80, sm_90
// Grouped W4A16 (g128) GEMV-class kernel on the FP16 tensor cores for MoE decode (issue 33): every expert of a layer in
// one launch, each touched expert's codes, scales and zeros read once per pass of up to 8 * NT of its rows. The routed
// token list, the output order and the touched-expert walk are grouped_gemv.cu's; the tile is gemv_w4a16_tc.cu's
// (codes converted to fp16 q - z by lop3 and the 0x6400 magic number, the mma sums per group in fp32, the scale
// applied to the fp32 sums), with each lane's x rows gathered through the routed rows (`gathered_group` is that
// file's compute_group with the gather; TCG_WSCALE 0 only).
// Weights: each expert packed by kernels/quant/pack_w4.py pack_w4a16_tc (N % 16 == 0), the experts stacked: expert e's
// codes start at 16-byte index e * (N / 16) * (K / 64) * 32, its scale+zero words at e * (N / 16) * (K / G) * 16.
#include "gemv_w4a16_tc.cu"
#include "grouped_common.cuh"

static_assert(TCG_WSCALE == 0, "the grouped W4A16 kernel scales the fp32 sums");

// acc += x[rows of this pass, group grp] . dequant(w)^T; xr[j] is the x row of batch row g + 8 j (-1: none).
__device__ __forceinline__ void gathered_group(const Ctx& p, Acc& acc, const Group& w, int grp, const int (&xr)[NT]) {
  const int t = p.t;
  Acc part;
  Zero z0[TILES], z8[TILES];
  float s0[TILES], s8[TILES];
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    z0[r] = Zero(w.sz0[r]);
    z8[r] = Zero(w.sz8[r]);
    s0[r] = lo_half(w.sz0[r]);
    s8[r] = lo_half(w.sz8[r]);
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) part[r][j][i] = 0.f;
  }
#pragma unroll
  for (int c = 0; c < CPG; ++c) {
    unsigned xb[NT][8];
    const int k0 = (grp * CPG + c) * 64 + 16 * t;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
      if (xr[j] >= 0) {
        const uint4* src = reinterpret_cast<const uint4*>(p.x + (size_t)xr[j] * p.K + k0);
        lo = __ldg(src);
        hi = __ldg(src + 1);
      }
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
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_f16(part[r][j], a, xb[j][2 * s], xb[j][2 * s + 1]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < TILES; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      acc[r][j][0] = fmaf(s0[r], part[r][j][0], acc[r][j][0]);
      acc[r][j][1] = fmaf(s0[r], part[r][j][1], acc[r][j][1]);
      acc[r][j][2] = fmaf(s8[r], part[r][j][2], acc[r][j][2]);
      acc[r][j][3] = fmaf(s8[r], part[r][j][3], acc[r][j][3]);
    }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCG_MINB)
    grouped_w4a16_tc(const uint4* __restrict__ W, const unsigned* __restrict__ SZ, const __half* __restrict__ x,
                     __half* __restrict__ y, const int* __restrict__ rows, const int* __restrict__ offsets, int E,
                     int N, int K, int gather) {
  __shared__ short list[GROUPED_MAX_E];
  const int touched = touched_experts(offsets, E, list);
  const Ctx base = make_ctx(W, SZ, x, y, 0, N, K);
  const int groups = (base.ntiles + TILES - 1) / TILES;
  const long items = (long)touched * groups;
  for (long item = blockIdx.x; item < items; item += gridDim.x) {
    const int e = list[item / groups], tile0 = (int)(item % groups) * TILES;
    const int start = __ldg(offsets + e), count = __ldg(offsets + e + 1) - start;
    Ctx p = base;
    p.W = W + (size_t)e * base.ntiles * base.chunks * 32;
    p.SZ = SZ + (size_t)e * base.ntiles * base.groups * 16;
    for (int m0 = 0; m0 < count; m0 += 8 * NT) {
      const int M = min(8 * NT, count - m0);
      p.M = M;
      int xr[NT];
      routed_rows(xr, rows, start, m0, M, p.g, gather);
      Acc acc;
      zero_sums(acc);
      split_k<WARPS, U, Group>(p.groups, p.warp, [&](Group& w, int grp) { load_group(p, w, tile0, grp); },
                               [&](const Group& w, int grp) { gathered_group(p, acc, w, grp, xr); });
      reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, M, N, [&](int m, int n, float v) {
        y[(size_t)(start + m0 + m) * N + n] = __float2half_rn(v);
      });
      __syncthreads();  // the next pass writes the reduction buffer again
    }
  }
}

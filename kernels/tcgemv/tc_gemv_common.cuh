// Shared device code of the tensor-core GEMVs (gemv_w4a16_tc.cu, gemv_q8_tc.cu): the warps' walk over K and the sums
// across the warps of a CTA (the PTX wrappers they use are in ptx.cuh). No CUDA headers are needed.
#pragma once
#include "ptx.cuh"

// The warps' walk over the `count` K items (groups or chunks) of their row tiles: warp w takes items w, w + WARPS,
// ...; each step loads U items (load(item, i)) before the first is used (compute(item, i), for i < count only), so
// U items' loads per lane are in flight. The number of steps is the same for every warp.
template <int WARPS, int U, class Item, class Load, class Compute>
__device__ __forceinline__ void split_k(int count, int warp, Load load, Compute compute) {
  const int steps = (count + WARPS * U - 1) / (WARPS * U);
  for (int b = 0; b < steps; ++b) {
    Item w[U];
#pragma unroll
    for (int u = 0; u < U; ++u) load(w[u], b * WARPS * U + warp + u * WARPS);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = b * WARPS * U + warp + u * WARPS;
      if (i < count) compute(w[u], i);
    }
  }
}

template <int TILES, int NT, class Acc>
__device__ __forceinline__ void zero_sums(Acc (&acc)[TILES][NT][4]) {
#pragma unroll
  for (int r = 0; r < TILES; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][j][i] = Acc(0);
}

// Across the WARPS warps of a CTA, one of its TILES row tiles (16 channels) at a time: each warp's m16n8 accumulators
// (c_i at channel g + 8 (i / 2), batch row 8 j + 2 t + i % 2) go to red[warp][channel][batch row]; then one thread
// per (batch row m < M, channel n < N) sums them in the accumulator's type (s32 sums stay exact) and calls
// store(m, n, sum).
template <int WARPS, int NT, int TILES, class Acc, class Store>
__device__ __forceinline__ void reduce_tiles(const Acc (&acc)[TILES][NT][4], int warp, int g, int t, int tile0, int M,
                                             int N, Store store) {
  __shared__ Acc red[WARPS][16][NT * 8];
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    if (r) __syncthreads();  // the previous tile's readers of red are done
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) red[warp][g + 8 * (i >> 1)][8 * j + 2 * t + (i & 1)] = acc[r][j][i];
    __syncthreads();
    for (int idx = threadIdx.x; idx < NT * 8 * 16; idx += WARPS * 32) {
      const int ch = idx & 15, m = idx >> 4;
      const int n = (tile0 + r) * 16 + ch;
      if (m < M && n < N) {
        Acc v = 0;
#pragma unroll
        for (int q = 0; q < WARPS; ++q) v += red[q][ch][m];
        store(m, n, v);
      }
    }
  }
}

// arch: sm_80, sm_90
// Grouped bf16 GEMV-class kernel on the tensor cores for MoE decode (issue 33): every expert of a layer in one launch,
// each touched expert's weights read once per pass of up to 8 * NT of its rows. The routed token list, the output
// order and the touched-expert walk are grouped_gemv.cu's; the tile is gemv_f16_tc.cu's (weights as the mma's A
// operand straight from global memory into registers, the expert's rows as its N, warps splitting K, sums through
// shared memory), with each lane's x rows gathered through the routed rows.
// Weights: each expert's N x K packed by kernels/tcgemv/tc_gemv_f16.py pack_f16_tc (N % 16 == 0, so no tile straddles two
// experts), the experts stacked: expert e's tiles start at 16-byte index e * (N / 16) * (K / 64) * 128.
// TCF_SILU 1: the gate+up layer with SiLU·mul in the epilogue, y[row][8 T + c] = silu(gate) * up from the fp32 sums,
// output N / 2 wide; each 16-channel tile T holds gate channels 8 T .. 8 T + 7 (its rows 0-7) and the matching up
// channels (rows 8-15): grouped.py interleave_gate_up orders a [gate; up] weight so before packing. `silu_mul_bf16` is
// the unfused alternative's separate elementwise kernel on a plain [gate | up] output.
#ifndef TCF_SILU
#define TCF_SILU 0
#endif
#include "gemv_f16_tc.cu"
#include "grouped_common.cuh"

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + __expf(-g)) * u; }

// reduce_tiles for TCF_SILU: the warps' sums of each row tile meet in shared memory, then one thread per (batch row
// m < M, gate channel c < 8) sums gate (channel c) and up (channel c + 8) and calls store(m, 8 * tile + c, silu * up).
template <int WARPS, int NT, int TILES, class Store>
__device__ __forceinline__ void reduce_tiles_silu(const float (&acc)[TILES][NT][4], int warp, int g, int t, int tile0,
                                                  int M, int ntiles, Store store) {
  __shared__ float red[WARPS][16][NT * 8];
#pragma unroll
  for (int r = 0; r < TILES; ++r) {
    if (r) __syncthreads();
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) red[warp][g + 8 * (i >> 1)][8 * j + 2 * t + (i & 1)] = acc[r][j][i];
    __syncthreads();
    for (int idx = threadIdx.x; idx < NT * 8 * 8; idx += WARPS * 32) {
      const int c = idx & 7, m = idx >> 3;
      if (m < M && tile0 + r < ntiles) {
        float gs = 0.f, us = 0.f;
#pragma unroll
        for (int q = 0; q < WARPS; ++q) {
          gs += red[q][c][m];
          us += red[q][c + 8][m];
        }
        store(m, (tile0 + r) * 8 + c, silu_mul(gs, us));
      }
    }
  }
}

// acc += x[rows of this pass, chunk c] . W[tiles, chunk c]^T; xr[j] is the x row of batch row g + 8 j (-1: none).
__device__ __forceinline__ void gathered_chunk(const Ctx& p, Sums& acc, const Chunk& w, int c, const int (&xr)[NT]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    uint4 xs[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    if (xr[j] >= 0) {
      const uint4* src = reinterpret_cast<const uint4*>(p.x + (size_t)xr[j] * p.K + (size_t)c * 64 + 8 * p.t);
      xs[0] = __ldg(src);
      xs[1] = __ldg(src + 4);
    }
#pragma unroll
    for (int r = 0; r < TILES; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 lo = w[r][2 * h], hi = w[r][2 * h + 1];
        mma16(acc[r][j], lo.x, hi.x, lo.y, hi.y, xs[h].x, xs[h].y);
        mma16(acc[r][j], lo.z, hi.z, lo.w, hi.w, xs[h].z, xs[h].w);
      }
  }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCF_MINB)
    grouped_f16_tc(const uint4* __restrict__ W, const unsigned short* __restrict__ x, unsigned short* __restrict__ y,
                   const int* __restrict__ rows, const int* __restrict__ offsets, int E, int N, int K, int gather) {
  __shared__ short list[GROUPED_MAX_E];
  const int touched = touched_experts(offsets, E, list);
  const int lane = threadIdx.x & 31, chunks = K >> 6, ntiles = N >> 4;
  const int groups = (ntiles + TILES - 1) / TILES;
  const long items = (long)touched * groups;
  for (long item = blockIdx.x; item < items; item += gridDim.x) {
    const int e = list[item / groups], tile0 = (int)(item % groups) * TILES;
    const int start = __ldg(offsets + e), count = __ldg(offsets + e + 1) - start;
    const Ctx p{W + (size_t)e * ntiles * chunks * 128, x, y, 0, N, K, chunks, ntiles, (int)threadIdx.x >> 5, lane,
                lane >> 2, lane & 3};
    for (int m0 = 0; m0 < count; m0 += 8 * NT) {
      const int M = min(8 * NT, count - m0);
      int xr[NT];
      routed_rows(xr, rows, start, m0, M, p.g, gather);
      Sums acc;
      zero_sums(acc);
      split_k<WARPS, U, Chunk>(chunks, p.warp, [&](Chunk& w, int c) { load_chunk(p, w, tile0, c); },
                               [&](const Chunk& w, int c) { gathered_chunk(p, acc, w, c, xr); });
#if TCF_SILU
      reduce_tiles_silu<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, M, ntiles, [&](int m, int n, float v) {
        y[(size_t)(start + m0 + m) * (N >> 1) + n] = to_out(v);
      });
#else
      reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, M, N, [&](int m, int n, float v) {
        y[(size_t)(start + m0 + m) * N + n] = to_out(v);
      });
#endif
      __syncthreads();  // the next pass writes the reduction buffer again
    }
  }
}

__device__ __forceinline__ unsigned silu_mul2(unsigned g, unsigned u) {  // two bf16 pairs -> one
  const float lo = silu_mul(__uint_as_float(g << 16), __uint_as_float(u << 16));
  const float hi = silu_mul(__uint_as_float(g & 0xffff0000u), __uint_as_float(u & 0xffff0000u));
  return (unsigned)to_out(lo) | ((unsigned)to_out(hi) << 16);
}

// out[r][c] = silu(y[r][c]) * y[r][half + c] over bf16 rows of 2 * half (half % 8 == 0), eight values a thread.
extern "C" __global__ void silu_mul_bf16(const uint4* __restrict__ y, uint4* __restrict__ out, int rows, int half) {
  const int per_row = half >> 3;
  const long total = (long)rows * per_row;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const long r = i / per_row;
    const int c = (int)(i - r * per_row);
    const uint4 g = __ldg(y + r * 2 * per_row + c), u = __ldg(y + r * 2 * per_row + per_row + c);
    out[i] = make_uint4(silu_mul2(g.x, u.x), silu_mul2(g.y, u.y), silu_mul2(g.z, u.z), silu_mul2(g.w, u.w));
  }
}

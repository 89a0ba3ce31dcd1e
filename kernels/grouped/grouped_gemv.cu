// Grouped GEMV-class kernels for MoE decode (issue 33): every expert of a layer in one launch, each touched expert's
// weights read once for all the tokens routed to it. y[r, n] = sum_k x[row(r), k] * W[e(r)][n, k] for every routed row
// r (token, expert) pair, rows sorted by expert.
//
// The routed token list (models/moe.py `route`, built on the host or by a router kernel):
//   rows     int32 [R = B * top_k]: token ids sorted by expert (gather = 1: x is [B, K] and row r reads x[rows[r]];
//            gather = 0: x is already in routed order [R, K], e.g. the activations between gate+up and down)
//   offsets  int32 [E + 1]: expert e owns routed rows offsets[e] .. offsets[e + 1] - 1 (0 rows: nothing read)
//   y        [R, N] in routed order (the combine with the router's weights is the caller's)
// The grid is fixed by (E, N) alone and the routing is read on the device, so one CUDA graph serves every routing.
//
// Geometry: every CTA first lists the touched experts (a ballot over the offsets, in shared memory); a persistent grid
// then walks the work items (touched expert, tile of GEMV_RW weight rows) grid-stride, so the CTAs share the tiles
// evenly whatever the routing (a walk over all E experts' items left 2.5x more tiles on the busiest CTA than the mean
// at E = 256, B = 1) and an expert with no rows costs nothing. A tile multiplies its expert's rows GEMV_MB at a time (the weights of a second pass come from L2). The
// tile itself is the dense GEMV's (gemv_common.cuh: warps split K, 16-byte streaming loads, weights decoded once per
// chunk for all rows); the per-scheme policies are the dense kernels' (gemv_f16.cu, gemv_w4a16.cu), given the
// expert's weight pointers, the rows' physical x rows and the output rows.
#include "gemv_f16.cu"
#include "gemv_w4a16.cu"
#include "grouped_common.cuh"

// A dense policy P seen through one (expert, row pass): x row m is xrow[m], output row m is r0 + m.
template <class P>
struct Routed : P {
  int xrow[GEMV_MB];
  int r0;
  __device__ void load_x(typename P::XRow& f, int m, int c) const { P::load_x(f, xrow[m], c); }
  __device__ void store(int row, int m, float v) const { P::store(row, r0 + m, v); }
};

// One (expert, tile) item, its rows in passes of GEMV_MB: the dense skeleton's loop without x in registers.
template <class P>
__device__ __forceinline__ void tile_rows(Routed<P>& p, const int* rows, int start, int count, int gather, int tile,
                                          int N, int nchunks) {
  constexpr int MB = GEMV_MB, RW = GEMV_RW, U = GEMV_U;
  const int stride = blockDim.x;
  for (int m0 = 0; m0 < count; m0 += MB) {
    const int M = min(MB, count - m0);
    p.r0 = start + m0;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      const int r = start + m0 + min(m, M - 1);
      p.xrow[m] = gather ? __ldg(rows + r) : r;
    }
    float acc[RW][MB];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int m = 0; m < MB; ++m) acc[r][m] = 0.f;
    for (int c0 = threadIdx.x; c0 < nchunks; c0 += stride * U) {
      uint4 w[U][RW];
      load_tile(p, w, tile, N, c0, stride, nchunks);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + u * stride;
        if (c < nchunks) chunk_fma(p, acc, w[u], tile, N, c, M, XFromMem<Routed<P>>{p, c});
      }
    }
    reduce_store(p, acc, tile, M, N);
  }
}

// Walk the items (touched expert, tile) grid-stride, tiles of one expert on consecutive CTAs, so every CTA gets the
// same number of tiles (+- 1) whatever the routing; `at(e)` gives the policy of expert e.
template <class P, class At>
__device__ __forceinline__ void grouped_run(At at, const int* rows, const int* offsets, int E, int N, int nchunks,
                                            int gather) {
  __shared__ short list[GROUPED_MAX_E];
  const int touched = touched_experts(offsets, E, list);
  const int ntiles = (N + GEMV_RW - 1) / GEMV_RW;
  const long items = (long)touched * ntiles;
  for (long item = blockIdx.x; item < items; item += gridDim.x) {
    const int e = list[item / ntiles], tile = (int)(item % ntiles);
    const int start = __ldg(offsets + e), count = __ldg(offsets + e + 1) - start;
    Routed<P> p;
    static_cast<P&>(p) = at(e);
    tile_rows(p, rows, start, count, gather, tile, N, nchunks);
  }
}

// bf16 weights [E, N, K] row-major, x bf16, y bf16 [R, N]. K % 8 == 0.
extern "C" __global__ void grouped_gemv_bf16(const uint4* W, const __nv_bfloat16* x, __nv_bfloat16* y,
                                             const int* rows, const int* offsets, int E, int N, int K, int gather) {
  const int rc = K / 8;
  grouped_run<PolicyBF16>([&](int e) { return PolicyBF16{W + (size_t)e * N * rc, x, y, N, K, rc}; }, rows, offsets, E,
                          N, rc, gather);
}

// W4A16 (kernels/quant/pack_w4.py pack_w4a16 of the stacked [E * N, K] codes): Wp uint32 [E, N, K/8], SZ uint32
// [E, N, K/G]; x fp16, y fp16 [R, N]. K % 32 == 0, G a power of two >= 32 (gshift = log2(G / 32)).
extern "C" __global__ void grouped_gemv_w4a16(const uint4* W, const unsigned* SZ, const __half* x, __half* y,
                                              const int* rows, const int* offsets, int E, int N, int K, int gshift) {
  const int rc = K / 32, ng = K >> (gshift + 5);
  grouped_run<PolicyW4A16>([&](int e) {
    return PolicyW4A16{W + (size_t)e * N * rc, SZ + (size_t)e * N * ng, x, y, N, K, rc, ng, gshift};
  }, rows, offsets, E, N, rc, 1);
}

// The same for the down projection's input, already in routed order (x [R, K], gather = 0).
extern "C" __global__ void grouped_gemv_w4a16_routed(const uint4* W, const unsigned* SZ, const __half* x, __half* y,
                                                     const int* rows, const int* offsets, int E, int N, int K,
                                                     int gshift) {
  const int rc = K / 32, ng = K >> (gshift + 5);
  grouped_run<PolicyW4A16>([&](int e) {
    return PolicyW4A16{W + (size_t)e * N * rc, SZ + (size_t)e * N * ng, x, y, N, K, rc, ng, gshift};
  }, rows, offsets, E, N, rc, 0);
}

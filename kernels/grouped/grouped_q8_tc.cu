// arch: sm_89, sm_90
// Grouped FP8 (e4m3) GEMV-class kernel on the tensor cores for MoE decode (issue 33): every expert of a layer in one
// launch, each touched expert's weights read once per pass of up to 8 * NT of its rows. The routed token list, the
// output order and the touched-expert walk are grouped_tc.cu's; the tile is gemv_q8_tc.cu's with Q8_S8 0 (weights as
// the mma's A operand straight from global memory, the expert's rows as its N, warps splitting K, fp32 sums over all
// of K through shared memory), with each lane's x rows gathered through the routed rows (`gathered_chunk` is that
// file's mma_chunk with the gathered x). Q8_F16 1 (the default of grouped.py): each fragment converted to fp16 once
// (cvt.rn.f16x2.e4m3x2, exact, sm_89+) for the f16 mma.sync m16n8k16, as fp8_tc_gemv does; Q8_F16 0: the e4m3
// mma.sync m16n8k32 itself.
// Scales: one fp32 weight scale per expert (sw[E], per-tensor within an expert) and one fp32 activation scale per x
// row (sa: per token, as the dense fp8 kernels' activations), applied once per output; fp16 output.
// Weights: each expert's N x K e4m3 codes packed by kernels/quant/pack_q8.py pack_q8_tc (N % 16 == 0, so no tile
// straddles two experts), the experts stacked: expert e's words start at 16-byte index e * (N / 16) * (K / 64) * 64.
#include "gemv_q8_tc.cu"
#include "grouped_common.cuh"

static_assert(Q8_S8 == 0, "the grouped 8-bit kernel is the e4m3 one");

// x row xr (-1: none) at k = 64 c + 16 t .. + 15 (both k-steps of the chunk).
__device__ __forceinline__ uint4 gathered_x(const Ctx& p, int xr, int c) {
  if (xr < 0) return make_uint4(0, 0, 0, 0);
  return __ldg(reinterpret_cast<const uint4*>(p.x + (size_t)xr * p.K + (size_t)c * 64 + 16 * p.t));
}

// acc += x[rows of this pass, chunk c] . W[tiles, chunk c]^T; xr[j] is the x row of batch row g + 8 j (-1: none).
__device__ __forceinline__ void gathered_chunk(const Ctx& p, Sums& acc, const Chunk& w, int c, const int (&xr)[NT]) {
  mma_chunk(acc, w, [&](int j) { return gathered_x(p, xr[j], c); });
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, TCQ_MINB)
    grouped_fp8_tc(const uint4* __restrict__ W, const float* __restrict__ sw, const unsigned char* __restrict__ x,
                   const float* __restrict__ sa, unsigned short* __restrict__ y, const int* __restrict__ rows,
                   const int* __restrict__ offsets, int E, int N, int K, int gather) {
  __shared__ short list[GROUPED_MAX_E];
  const int touched = touched_experts(offsets, E, list);
  const int lane = threadIdx.x & 31, chunks = K >> 6, ntiles = N >> 4;
  const int groups = (ntiles + TILES - 1) / TILES;
  const long items = (long)touched * groups;
  for (long item = blockIdx.x; item < items; item += gridDim.x) {
    const int e = list[item / groups], tile0 = (int)(item % groups) * TILES;
    const int start = __ldg(offsets + e), count = __ldg(offsets + e + 1) - start;
    const float scale = __ldg(sw + e);
    Ctx p{W + (size_t)e * ntiles * chunks * 64, x, sa, sw, y, 0, N, K, chunks, ntiles, (int)threadIdx.x >> 5, lane,
          lane >> 2, lane & 3};
    for (int m0 = 0; m0 < count; m0 += 8 * NT) {
      const int M = min(8 * NT, count - m0);
      p.M = M;
      int xr[NT];
      routed_rows(xr, rows, start, m0, M, p.g, gather);
      Sums acc;
      zero_sums(acc);
      split_k<WARPS, U, Chunk>(chunks, p.warp, [&](Chunk& w, int c) { load_chunk(p, w, tile0, c); },
                               [&](const Chunk& w, int c) { gathered_chunk(p, acc, w, c, xr); });
      reduce_tiles<WARPS, NT, TILES>(acc, p.warp, p.g, p.t, tile0, M, N, [&](int m, int n, float v) {
        const int i = start + m0 + m, xi = gather ? __ldg(rows + i) : i;
        y[(size_t)i * N + n] = f32_to_f16(v * __ldg(sa + xi) * scale);
      });
      __syncthreads();  // the next pass writes the reduction buffer again
    }
  }
}

// arch: sm_90a
// FP8 block-scaled wgmma GEMM (Hopper, sm_90a), DeepSeek-V3 / DeepGEMM style: y[M,N] = sum over K blocks kb of
// (xq[M, kb] . Wq[N, kb]^T) * sx[m, kb] * sw[n / 128, kb], with e4m3 codes, one fp32 scale per 128 x 128 weight block
// and one per 1 x 128 activation group (a token's 128 consecutive K), fp16 output.
//
// The mainloop is wg_gemm.cu's cp.async one (weights as wgmma's A, 64 channels per warpgroup; the batch as its N;
// 128-byte swizzle; STAGES-deep cp.async pipeline; persistent stream-K grid with the slot fix-up of wg_common.cuh).
// What differs is the accumulation: per K block of 128 (four m64nBMk32 QGMMAs) the tensor cores write a fresh
// partial sum (scale-d = 0 on the first k-step), the warpgroup waits for it (wgmma.wait_group 0) and promotes it
// into the fp32 accumulators with one FFMA per accumulator by the block's combined scale sx[m] * sw:
//   per K block and thread: 1 + BM/8 scale loads (the weight block's scale, uniform over the warpgroup's 64 channels
//   which lie in one 128-channel block; the activation scales as float2, rows m and m+1), BM/4 FMUL (sx * sw),
//   BM/2 FFMA (acc += part * s), one wgmma.wait_group 0 instead of keeping a group in flight, and up to BM/4 + 1
//   register moves putting the prefetched scales of the next block in place.
// The scale loads of the next K block are issued before this block's QGMMAs (one block ahead), so their latency
// hides behind the tensor cores and the copies. Scales of a split
// tile's pieces are applied before the fix-up, so the slots hold scaled fp32 sums and the epilogue only converts.
//
// Layouts: x codes [M, K] and W codes [N, K] K-contiguous; sx [K/128][m_pad] fp32 (K-block major, rows padded to a
// multiple of BM, so a thread's loads need no bound check); sw [N/128][K/128] fp32. K a multiple of KT (itself a
// multiple of 128), N a multiple of 64 * WG; M > BM runs in m-tiles (grid.y), BM <= 128 (accumulators + partials).
#include "wg_common.cuh"

namespace wg {

struct OpFP8Block {  // the sums arrive scaled: fp16 out
  using T = E4M3;
  using Acc = float;
  static constexpr bool scaled = false;
  __device__ __forceinline__ static unsigned short out(float v, float, float) { return f32_to_f16(v); }
};

template <int BM, int WG, int STAGES, int KT>
__device__ __forceinline__ void gemm_fp8_block(const unsigned char* __restrict__ X, const unsigned char* __restrict__ W,
                                               const Params& p, int k_bytes, int m_pad) {
  constexpr int NT = WG * 128, BW = 64 * WG, W_BYTES = BW * KT, STAGE = (BW + BM) * KT, BLOCKS = KT / 128;
  constexpr int R = BM / 2, NS = BM / 4;  // accumulators per thread, distinct batch rows per thread
  static_assert(STAGES >= 3 && KT % 128 == 0 && BM % 16 == 0 && BM <= 128, "3+ stages, 128-byte k-atoms, BM <= 128");
  using Mma = wg::Mma<E4M3, BM>;

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sbase = (smem_addr(smem) + 1023u) & ~1023u;
  const int g = threadIdx.x >> 7, lane = threadIdx.x & 31;
  const int tiles_n = p.N / BW, ktiles = k_bytes / KT, kblocks = k_bytes / 128, m0 = blockIdx.y * BM;
  const StreamK sk(tiles_n * ktiles);
  const int begin = sk.begin(blockIdx.x), end = sk.begin(blockIdx.x + 1);
  const unsigned char* Xt = X + static_cast<long long>(m0) * k_bytes;
  const float* sx_rows = p.sa + m0 + (lane & 3) * 2;  // this thread's rows m0 + 2 (lane % 4) + 8 j + {0, 1}

  for (int it = begin; it < end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (end - it)), nk = k1 - k0, n0 = nt * BW;
    const unsigned char* Wt = W + static_cast<long long>(n0) * k_bytes;
    const float* sw_row = p.sb + static_cast<long long>((n0 + g * 64) >> 7) * kblocks;
    auto load_stage = [&](int stage, int kt) {
      const unsigned s = sbase + stage * STAGE;
      const long long kb = static_cast<long long>(kt) * KT;
      load_tile<BW, KT, NT, false>(s, Wt, BW, k_bytes, kb);
      load_tile<BM, KT, NT, true>(s + W_BYTES, Xt, p.M - m0, k_bytes, kb);
    };

    float acc[1][R], part[R];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[0][i] = part[i] = 0.0f;
    // The scales of K block kb + 1 are loaded while block kb runs (one block ahead): their L2 latency, ~0.2 us per
    // block when loaded in place (H200, bench/bench_fp8_block.py), stays off the path to the promotion.
    float2 xs[NS / 2], xs_next[NS / 2];
    float wscale, wscale_next;
    auto load_scales = [&](int kblk, float2(&x)[NS / 2], float& w) {
      w = __ldg(sw_row + kblk);
#pragma unroll
      for (int j = 0; j < NS / 2; ++j)
        x[j] = __ldg(reinterpret_cast<const float2*>(sx_rows + static_cast<long long>(kblk) * m_pad + 8 * j));
    };
    const int last_block = k1 * BLOCKS - 1;
    load_scales(k0 * BLOCKS, xs, wscale);

#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
      if (s < nk) load_stage(s, k0 + s);
      cp_async_commit();
    }
    for (int i = 0; i < nk; ++i) {
      cp_async_wait<STAGES - 3>();
      fence_proxy_async();
      __syncthreads();  // every thread's copies of k-tile i have landed; every wgmma of k-tile i-1 is complete
      if (i + STAGES - 2 < nk) load_stage((i + STAGES - 2) % STAGES, k0 + i + STAGES - 2);
      cp_async_commit();
      const unsigned sw = sbase + (i % STAGES) * STAGE + g * 64 * 128, sx = sbase + (i % STAGES) * STAGE + W_BYTES;
#pragma unroll
      for (int b = 0; b < BLOCKS; ++b) {  // one 128-deep K block: atom b of the stage
        const int kblk = (k0 + i) * BLOCKS + b;
        load_scales(min(kblk + 1, last_block), xs_next, wscale_next);
        fence_acc(part);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          Mma::run(part, descriptor(sw + b * BW * 128 + ks * 32), descriptor(sx + b * BM * 128 + ks * 32), ks != 0);
        wgmma_commit();
        wgmma_wait<0>();  // promoting a partial while a wgmma is in flight makes ptxas serialize them (C7514)
        fence_acc(part);
        float s[NS];
#pragma unroll
        for (int j = 0; j < NS / 2; ++j) {
          s[2 * j] = xs[j].x * wscale;
          s[2 * j + 1] = xs[j].y * wscale;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) acc[0][r] = fmaf(part[r], s[(r >> 2) * 2 + (r & 1)], acc[0][r]);  // store_tile
        wscale = wscale_next;
#pragma unroll
        for (int j = 0; j < NS / 2; ++j) xs[j] = xs_next[j];
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warpgroup is done with the stages before the next range refills them
    finish_tile<OpFP8Block, BM, NT, 1>(acc, p, n0 + g * 64, m0, nt, tiles_n, k0, k1, ktiles, sk);
    it += nk;
  }
}

}  // namespace wg

// grid (CTAs, m-tiles), block WG*128, dynamic shared memory STAGES * (64*WG + BM) * KT + 1024 bytes; k_bytes = K,
// a multiple of KT; N a multiple of 64*WG; sx [K/128][m_pad], sw [N/128][K/128] (fp32).
template <int BM, int WG, int STAGES, int KT>
__global__ void __launch_bounds__(WG * 128, 1)
    wg_gemm_fp8_block(const unsigned char* __restrict__ x, const unsigned char* __restrict__ w, void* out, void* ws,
                      int* counters, const float* sx, const float* sw, int M, int N, int k_bytes, int m_pad) {
  const wg::Params p{out, ws, counters, sx, sw, M, N};
  wg::gemm_fp8_block<BM, WG, STAGES, KT>(x, w, p, k_bytes, m_pad);
}

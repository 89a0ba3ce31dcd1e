// arch: sm_90a
// wgmma GEMMs (Hopper, sm_90a): y[M,N] = x[M,K] . W[N,K]^T for 16-bit (bf16, fp16) and 8-bit (int8, e4m3) operands
// stored as plain K-contiguous rows, on the warpgroup tensor-core path (HGMMA / IGMMA / QGMMA in SASS).
//
// Swapped operands: the weights are wgmma's A (64 output channels per warpgroup, the "M" of m64nNk16) and the
// activations its B, so the batch is wgmma's N (16..256): one instruction covers the whole batch tile, and a small
// batch wastes no tensor-core rows. Both operands sit in shared memory in the 128-byte swizzle layout (the one TMA
// writes; see load_tile). cp.async fills them (16-byte copies, rows past M zero-filled), fence.proxy.async hands them
// to the tensor cores, and the wgmma of k-tile i runs while the copies of
// k-tiles i+1 .. i+STAGES-2 are in flight; one wgmma group stays in flight across the barrier (wait_group 1), so a
// stage is refilled two k-tiles after its wgmma was issued.
//
// Work split: a persistent grid over (n-tile of 64*WG channels, k-tile of KT bytes) per m-tile of BM rows: whole
// tiles, every tile in the same number of pieces, or stream-K, as the host chose the grid
// (models.kernel_terms.persistent_grid, splitk.cuh StreamK); the pieces of a split tile meet in per-CTA slots of a
// 32-bit workspace and the CTA that completes the tile sums them (finish_tile in wg_common.cuh), or, in the cluster
// entries below, run as one cluster and sum through distributed shared memory (finish_cluster).
//
// Entries: templates wg_gemm<Op, BM, WG, STAGES, KT> (cp.async) and wg_gemm_tma<Op, BM, WG, MB, STAGES, KT> (TMA,
// below), and both as clusters of a split tile's CL pieces (wg_gemm_cluster, wg_gemm_tma_cluster: the pieces summed
// in distributed shared memory), instantiated by name expression (kernels/wgmma/wgmma.py).
#include "wg_common.cuh"

namespace wg {

template <class Op, int BM, int WG, int STAGES, int KT, int CL = 1>
__device__ __forceinline__ void gemm(const unsigned char* __restrict__ X, const unsigned char* __restrict__ W,
                                     const Params& p, int k_bytes) {
  constexpr int NT = WG * 128, BW = 64 * WG, W_BYTES = BW * KT, STAGE = (BW + BM) * KT, NSTEP = KT / 32;
  static_assert(STAGES >= 3 && KT % 128 == 0 && BM % 16 == 0, "3+ stages, 128-byte k-atoms, BM a multiple of 16");
  using Acc = typename Op::Acc;
  using Mma = wg::Mma<typename Op::T, BM>;

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sbase = (smem_addr(smem) + 1023u) & ~1023u;  // 1 KB of the allocation is slack for this
  const int g = threadIdx.x >> 7;
  const int tiles_n = p.N / BW, ktiles = k_bytes / KT, m0 = blockIdx.y * BM;
  const StreamK sk(tiles_n, ktiles);
  const int begin = sk.begin(blockIdx.x), end = sk.begin(blockIdx.x + 1);
  const unsigned char* Xt = X + static_cast<long long>(m0) * k_bytes;

  for (int it = begin; it < end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (end - it)), nk = k1 - k0, n0 = nt * BW;
    const unsigned char* Wt = W + static_cast<long long>(n0) * k_bytes;
    auto load_stage = [&](int stage, int kt) {
      const unsigned s = sbase + stage * STAGE;
      const long long kb = static_cast<long long>(kt) * KT;
      load_tile<BW, KT, NT, false>(s, Wt, BW, k_bytes, kb);
      load_tile<BM, KT, NT, true>(s + W_BYTES, Xt, p.M - m0, k_bytes, kb);
    };

    constexpr int PK = promote_window<Op, BM, KT>();
    Acc acc[1][BM / 2], total[1][PK ? BM / 2 : 1];
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) acc[0][i] = Acc(0);
#pragma unroll
    for (int i = 0; i < (PK ? BM / 2 : 0); ++i) total[0][i] = Acc(0);

#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
      if (s < nk) load_stage(s, k0 + s);
      cp_async_commit();
    }
    for (int i = 0; i < nk; ++i) {
      cp_async_wait<STAGES - 3>();
      fence_proxy_async();  // this thread's copies of k-tile i, visible to the async proxy ...
      __syncthreads();      // ... and every thread's; the wgmma of k-tile i-2 is done (wait_group 1 below)
      if (i + STAGES - 2 < nk) load_stage((i + STAGES - 2) % STAGES, k0 + i + STAGES - 2);
      cp_async_commit();
      const unsigned sw = sbase + (i % STAGES) * STAGE + g * 64 * 128, sx = sbase + (i % STAGES) * STAGE + W_BYTES;
      int chain = 1;  // 0: this k-tile starts a new promotion window
      if constexpr (PK > 0) {
        if (i > 0 && i % PK == 0) {
          wgmma_wait<0>();
          fence_acc(acc[0]);
          promote(total[0], acc[0]);
          chain = 0;
        }
      }
      fence_acc(acc[0]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < NSTEP; ++ks) {  // k-step ks: atom ks / 4, bytes 32 (ks % 4) of its rows
        const unsigned k_off = (ks & 3) * 32;
        Mma::run(acc[0], descriptor(sw + (ks >> 2) * BW * 128 + k_off), descriptor(sx + (ks >> 2) * BM * 128 + k_off),
                 ks == 0 ? chain : 1);
      }
      wgmma_commit();
      wgmma_wait<1>();
      fence_acc(acc[0]);
    }
    wgmma_wait<0>();
    fence_acc(acc[0]);
    if constexpr (PK > 0) promote(acc[0], total[0]);  // the last window's sums plus the earlier ones
    cp_async_wait<0>();
    __syncthreads();  // every warpgroup is done with the stages before the next range refills them
    finish_tile<Op, BM, NT, 1, 16, 64, CL>(acc, p, n0 + g * 64, m0, nt, tiles_n, k0, k1, ktiles, sk, sbase);
    it += nk;
  }
}

// ---- TMA variant: a producer warp streams both tiles with the bulk tensor copy engine ----------------------------
// The stages are filled by cp.async.bulk.tensor (one thread issues a 2-D box per 128-byte atom of K, the copy engine
// writes the 128-byte swizzle layout itself and zero-fills rows past M), completion is counted on a per-stage "full"
// mbarrier, and the math warpgroups hand a stage back through its "empty" mbarrier (one arrival per math warp) once
// their wgmma of it has completed. The producer runs ahead across tile boundaries of the CTA's stream-K range, so the
// epilogue of one tile overlaps the loads of the next. Tensor maps (2 x 128 bytes: W, then x) are built on the host
// (kernels.wgmma.wgmma) and read from global memory.

template <class Op, int BM, int WG, int MB, int STAGES, int KT, int CL = 1>
__device__ __forceinline__ void gemm_tma(const unsigned char* __restrict__ maps, const Params& p, int k_bytes) {
  constexpr int NT = WG * 128, BW = 64 * WG * MB, W_BYTES = BW * KT, STAGE = (BW + BM) * KT, NSTEP = KT / 32;
  static_assert(STAGES >= 2 && KT % 128 == 0 && BM % 16 == 0 && BW <= 256, "2+ stages, 128-byte k-atoms, box <= 256");
  using Acc = typename Op::Acc;
  using Mma = wg::Mma<typename Op::T, BM>;

  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned sbase = (smem_addr(smem) + 1023u) & ~1023u;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tiles_n = p.N / BW, ktiles = k_bytes / KT, m0 = blockIdx.y * BM;
  const StreamK sk(tiles_n, ktiles);
  const int begin = sk.begin(blockIdx.x), end = sk.begin(blockIdx.x + 1);

  init_stage_barriers(full, empty, NT / 32);

  if (warp == NT / 32) {  // the producer warp
    if (lane == 0) {
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(maps) : "memory");
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(maps + 128) : "memory");
      for (int it = begin, iter = 0; it < end; ++it, ++iter) {
        const int s = iter % STAGES, nt = it / ktiles, kt = it % ktiles;
        const unsigned st = sbase + s * STAGE, bar = smem_addr(&full[s]);
        mbar_wait(smem_addr(&empty[s]), ((iter / STAGES) & 1) ^ 1);
        mbar_expect_tx(bar, STAGE);
#pragma unroll
        for (int a = 0; a < KT / 128; ++a) {
          tma_load_2d(st + a * BW * 128, maps, kt * KT + a * 128, nt * BW, bar);
          tma_load_2d(st + W_BYTES + a * BM * 128, maps + 128, kt * KT + a * 128, m0, bar);
        }
      }
    }
    if constexpr (CL > 1) {  // the math warps' two cluster barriers count this warp too (finish_cluster)
      __syncwarp();
      cluster_sync();
      cluster_sync();
    }
    return;
  }

  const int g = warp >> 2;
  for (int it = begin, iter = 0; it < end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (end - it)), nk = k1 - k0;
    constexpr int PK = promote_window<Op, BM, KT>();
    Acc acc[MB][BM / 2], total[MB][PK ? BM / 2 : 1];
#pragma unroll
    for (int b = 0; b < MB; ++b) {
#pragma unroll
      for (int i = 0; i < BM / 2; ++i) acc[b][i] = Acc(0);
#pragma unroll
      for (int i = 0; i < (PK ? BM / 2 : 0); ++i) total[b][i] = Acc(0);
    }
    for (int i = 0; i < nk; ++i, ++iter) {
      const int s = iter % STAGES;
      mbar_wait(smem_addr(&full[s]), (iter / STAGES) & 1);
      const unsigned sw = sbase + s * STAGE + g * MB * 64 * 128, sx = sbase + s * STAGE + W_BYTES;
      int chain = 1;  // 0: this k-tile starts a new promotion window
      if constexpr (PK > 0) {
        if (i > 0 && i % PK == 0) {
          wgmma_wait<0>();
#pragma unroll
          for (int b = 0; b < MB; ++b) {
            fence_acc(acc[b]);
            promote(total[b], acc[b]);
          }
          chain = 0;
        }
      }
#pragma unroll
      for (int b = 0; b < MB; ++b) fence_acc(acc[b]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < NSTEP; ++ks) {  // each k-step: one wgmma per 64-channel block, the same x slice
        const unsigned k_off = (ks & 3) * 32;
        const unsigned long long dx = descriptor(sx + (ks >> 2) * BM * 128 + k_off);
#pragma unroll
        for (int b = 0; b < MB; ++b)
          Mma::run(acc[b], descriptor(sw + b * 64 * 128 + (ks >> 2) * BW * 128 + k_off), dx, ks == 0 ? chain : 1);
      }
      wgmma_commit();
      wgmma_wait<1>();
#pragma unroll
      for (int b = 0; b < MB; ++b) fence_acc(acc[b]);
      if (i > 0 && lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));  // k-tile iter-1 is consumed
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < MB; ++b) {
      fence_acc(acc[b]);
      if constexpr (PK > 0) promote(acc[b], total[b]);  // the last window's sums plus the earlier ones
    }
    if (lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
    finish_tile<Op, BM, NT, MB, 16, 64, CL>(acc, p, nt * BW + g * MB * 64, m0, nt, tiles_n, k0, k1, ktiles, sk,
                                            sbase);
    it += nk;
  }
}

}  // namespace wg

// grid (CTAs, m-tiles), block WG*128, dynamic shared memory STAGES * (64*WG + BM) * KT + 1024 bytes; k_bytes = K *
// element bytes, a multiple of KT (itself a multiple of 128); N a multiple of 64*WG.
template <class Op, int BM, int WG, int STAGES, int KT>
__global__ void __launch_bounds__(WG * 128, 1)
    wg_gemm(const unsigned char* __restrict__ x, const unsigned char* __restrict__ w, void* out, void* ws,
            int* counters, const float* sa, const float* sb, int M, int N, int k_bytes) {
  const wg::Params p{out, ws, counters, sa, sb, M, N};
  wg::gemm<Op, BM, WG, STAGES, KT>(x, w, p, k_bytes);
}

// The TMA variant: block WG*128 + 32 (the last warp produces), each math warpgroup MB blocks of 64 channels (a CTA
// tile of 64*WG*MB channels, at most 256: the copy engine's box); maps = the two 128-byte tensor maps (W, then x) in
// global memory; dynamic shared memory STAGES * (64*WG*MB + BM) * KT + 1024 bytes.
template <class Op, int BM, int WG, int MB, int STAGES, int KT>
__global__ void __launch_bounds__(WG * 128 + 32, 1)
    wg_gemm_tma(const unsigned char* __restrict__ maps, void* out, void* ws, int* counters, const float* sa,
                const float* sb, int M, int N, int k_bytes) {
  const wg::Params p{out, ws, counters, sa, sb, M, N};
  wg::gemm_tma<Op, BM, WG, MB, STAGES, KT>(maps, p, k_bytes);
}

// The same kernels as clusters of CL CTAs (2..8): the grid cuts every tile into CL pieces (one per CTA, a cluster per
// tile) and the pieces are summed in distributed shared memory (finish_cluster in wg_common.cuh) instead of slots.
template <class Op, int BM, int WG, int STAGES, int KT, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(WG * 128, 1)
    wg_gemm_cluster(const unsigned char* __restrict__ x, const unsigned char* __restrict__ w, void* out, void* ws,
                    int* counters, const float* sa, const float* sb, int M, int N, int k_bytes) {
  const wg::Params p{out, ws, counters, sa, sb, M, N};
  wg::gemm<Op, BM, WG, STAGES, KT, CL>(x, w, p, k_bytes);
}

template <class Op, int BM, int WG, int MB, int STAGES, int KT, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(WG * 128 + 32, 1)
    wg_gemm_tma_cluster(const unsigned char* __restrict__ maps, void* out, void* ws, int* counters, const float* sa,
                        const float* sb, int M, int N, int k_bytes) {
  const wg::Params p{out, ws, counters, sa, sb, M, N};
  wg::gemm_tma<Op, BM, WG, MB, STAGES, KT, CL>(maps, p, k_bytes);
}

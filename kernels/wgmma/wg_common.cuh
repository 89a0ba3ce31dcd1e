// Shared device code of the wgmma (sm_90a) kernels (wg_gemm*.cu): PTX wrappers (cp.async, fences, wgmma groups,
// shared-memory matrix descriptors, mbarriers, TMA), output conversions, the epilogue Ops and the split-K epilogue.
// No CUDA headers are included (conversions go through cvt), so NVRTC needs no include path.
#pragma once
#include "splitk.cuh"
#include "wg_mma.cuh"

namespace wg {
using splitk::acc_add;
using splitk::acc_bits;
using splitk::ld_v4;
using splitk::st_v4;
using splitk::StreamK;
struct Params {
  void* out;
  void* ws;
  int* counters;
  const float* sa;  // per row of x (token), w8a8 and fp8
  const float* sb;  // per row of W (channel), w8a8 and fp8
  int M;
  int N;
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keep the compiler from moving accumulator reads or writes across the asynchronous wgmma boundaries.
template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void fence_acc(int (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// K-tiles per promotion window of a tile of BM batch rows and KT-byte k-tiles: 0 (none) for an Op without promotion
// and at BM = 256, where a second accumulator set would not fit the registers (128 + 128 per thread).
template <class Op, int BM, int KT>
__device__ __forceinline__ constexpr int promote_window() {
  return Op::promote_bytes > 0 && BM <= 128 ? (Op::promote_bytes > KT ? Op::promote_bytes / KT : 1) : 0;
}

// Add a window's sums into the fp32 totals (the next window restarts its chain with scale-d = 0).
template <int R>
__device__ __forceinline__ void promote(float (&total)[R], const float (&acc)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) total[i] += acc[i];
}

// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle layout: start address, leading byte
// offset unused (the 32 bytes of K of one wgmma lie inside one 128-byte row), 1024 bytes between 8-row groups.
__device__ __forceinline__ unsigned long long descriptor(unsigned addr) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

// Rows [0, R) x bytes [kb, kb + KT) of a K-contiguous matrix (ld bytes per row) into the 128-byte swizzle layout:
// K in atoms of 128 bytes, atom a of the tile at a * R * 128, row r of it at r * 128 with its 16-byte chunk c at
// ((c ^ (r & 7)) * 16). Eight consecutive threads copy one 128-byte row: one global line, all 32 banks. Rows >= valid
// are zeros. The tile must be 1024-byte aligned (the swizzle is a function of the address bits).
template <int R, int KT, int NT, bool CHECK>
__device__ __forceinline__ void load_tile(unsigned dst, const unsigned char* src, int valid, long long ld,
                                          long long kb) {
  constexpr int TOTAL = R * KT / 16;
#pragma unroll
  for (int j = 0; j < (TOTAL + NT - 1) / NT; ++j) {
    const int i = j * NT + static_cast<int>(threadIdx.x);
    if (TOTAL % NT != 0 && i >= TOTAL) break;
    const int c = i & 7, row = (i >> 3) % R, a = (i >> 3) / R;
    const bool ok = !CHECK || row < valid;
    cp_async16(dst + a * R * 128 + row * 128 + ((c ^ (row & 7)) << 4),
               ok ? src + row * ld + kb + a * 128 + c * 16 : src, ok ? 16 : 0);
  }
}

__device__ __forceinline__ unsigned short f32_to_bf16(float v) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ unsigned short f32_to_f16(float v) {
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ unsigned short* out_at(const Params& p, int m, int n) {
  return static_cast<unsigned short*>(p.out) + static_cast<long long>(m) * p.N + n;
}

// Epilogue Ops: the operand type, the accumulator, `out` (one output from its sum and, where `scaled`, the token's
// and the channel's scales) and `promote_bytes`: where > 0, the main loop adds the tensor cores' sums into a second
// set of fp32 registers after every window of that many bytes of K and restarts the chain (promote_window). QGMMA
// keeps fewer bits than fp32 as it accumulates: on the H200 a whole K of 4096 / 11008 / 14336 in one chain gave
// 1.35e-3 / 2.47e-3 / 2.90e-3 relative error against float64 (DeepSeek-V3's report finds the same on the H800).
struct OpBF16 {
  using T = BF16;
  using Acc = float;
  static constexpr bool scaled = false;
  static constexpr int promote_bytes = 0;
  __device__ __forceinline__ static unsigned short out(float v, float, float) { return f32_to_bf16(v); }
};

struct OpFP16 {
  using T = F16;
  using Acc = float;
  static constexpr bool scaled = false;
  static constexpr int promote_bytes = 0;
  __device__ __forceinline__ static unsigned short out(float v, float, float) { return f32_to_f16(v); }
};

struct OpW8A8 {  // int32 sums; per-token x per-channel scales in fp32, fp16 out
  using T = S8;
  using Acc = int;
  static constexpr bool scaled = true;
  static constexpr int promote_bytes = 0;
  __device__ __forceinline__ static unsigned short out(int v, float sa, float sb) {
    return f32_to_f16(static_cast<float>(v) * sa * sb);
  }
};

struct OpFP8 {  // native e4m3 x e4m3 -> fp32 (QGMMA); per-token x per-channel scales, fp16 out
  using T = E4M3;
  using Acc = float;
  static constexpr bool scaled = true;
  static constexpr int promote_bytes = 512;  // QGMMA's sums added into fp32 registers after every 512 of K
  __device__ __forceinline__ static unsigned short out(float v, float sa, float sb) { return f32_to_f16(v * sa * sb); }
};

// Whether an Op's outputs take the token's scale too (its `per_token`, where it declares one; else `scaled`): the
// W8A16 Ops scale by the channel only.
template <class Op, class = void>
struct PerToken {
  static constexpr bool value = Op::scaled;
};
template <class Op>
struct PerToken<Op, decltype(void(Op::per_token))> {
  static constexpr bool value = Op::per_token;
};

// Barrier over the NT math threads only (named barrier 1): the TMA kernel's producer warp does not take part.
template <int NT>
__device__ __forceinline__ void math_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(NT) : "memory");
}

// Epilogue of one tile. Warp w (of its warpgroup) holds MB accumulator blocks of 64 x BM; per n8 block j of the
// batch, d[4j + 2h + e] = y[m][n] with m = m0 + 8 j + 2 (lane % 4) + e (batch row) and channel
// n = n_base + WS w + BS b + lane/4 + 8 h for block b: the mma.sync C layout, transposed. (WS, BS) = (16, 64) when
// each block is 64 consecutive channels; the w4a16 kernel's packed layout gives each warp 32 consecutive channels,
// (32, 16). A thread's channel scales are loaded once, its token scales four 8-row groups at a time, each batch of
// loads before that batch's stores: the compiler cannot move a load of a scale above a store to y (they might alias),
// and one load, convert and store after the other cost 5 us per 128 x 128 tile (fp8, H200, globaltimer trace).
// Only the groups of four accumulators [lo, hi) (flattened over the blocks: block b's 8-row group g is b * BM / 8 + g)
// are stored: a cluster's CTAs each store their part of a tile (finish_cluster).
template <class Op, int BM, int MB, int WS, int BS>
__device__ __forceinline__ void store_tile(const typename Op::Acc (&acc)[MB][BM / 2], const Params& p, int n_base,
                                           int m0, int lo = 0, int hi = MB * BM / 8) {
  constexpr int G = BM / 8, GB = G < 4 ? G : 4;  // 8-row groups of the batch tile, per batch of scale loads
  const int lane = threadIdx.x & 31, n_warp = n_base + ((threadIdx.x >> 5) & 3) * WS + (lane >> 2);
  const int m_lane = m0 + (lane & 3) * 2;
  float sb[MB][2];
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) sb[b][h] = Op::scaled ? p.sb[n_warp + b * BS + 8 * h] : 1.f;
#pragma unroll
  for (int g0 = 0; g0 < G; g0 += GB) {
    bool any = false;
#pragma unroll
    for (int b = 0; b < MB; ++b) any |= b * G + g0 < hi && b * G + g0 + GB > lo;
    if (!any) continue;
    float sa[GB][2];
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int m = m_lane + (g0 + g) * 8 + e;
        sa[g][e] = PerToken<Op>::value && m < p.M ? p.sa[m] : 1.f;
      }
#pragma unroll
    for (int b = 0; b < MB; ++b)
#pragma unroll
      for (int g = 0; g < GB; ++g)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int e = q & 1, h = q >> 1, m = m_lane + (g0 + g) * 8 + e, gi = b * G + g0 + g;
          if (m < p.M && gi >= lo && gi < hi)
            *out_at(p, m, n_warp + b * BS + 8 * h) = Op::out(acc[b][4 * (g0 + g) + q], sa[g][e], sb[b][h]);
        }
  }
}

__device__ __forceinline__ void red_release_add(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- Clusters: the CL pieces of a split tile as one cluster (CTA rank r of the cluster runs piece r) ----------------
__device__ __forceinline__ int cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return static_cast<int>(r);
}
// Every non-exited thread of the cluster has arrived; what each wrote before (shared::cluster included) is visible.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The address in CTA `rank`'s shared memory of this CTA's shared address `addr`.
__device__ __forceinline__ unsigned cluster_map(unsigned addr, int rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster_v4(unsigned addr, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}
__device__ __forceinline__ void ld_shared_v4(unsigned addr, unsigned (&v)[4]) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}

// A split tile summed inside its cluster (a reduce-scatter through distributed shared memory, no global traffic): the
// tile's NG groups of four accumulators per thread (flattened over the blocks) fall into CL parts, part o = groups
// [o NG / CL, (o + 1) NG / CL), and CTA o sums and stores part o. After the first barrier every piece is past its main
// loop, so its pipeline stages (from `buf`, the 1 KB-aligned dynamic shared memory) may receive: each CTA writes every
// group it does not own into its owner's stages (16-byte stores, thread t's group at word 4 (j NT + t) of the sender's
// row of CH groups: the same thread mapping in every CTA, conflict-free), the second barrier publishes them, and each
// CTA adds the CL - 1 rows to its own registers and stores its part. A part may be empty (CL > NG). The host launches
// this only with the grid's CL pieces per tile as clusters of CL (kernels.wgmma.wgmma: (CL - 1) CH NT 16 bytes of stages).
template <class Op, int BM, int NT, int MB, int CL, int WS, int BS>
__device__ __forceinline__ void finish_cluster(typename Op::Acc (&acc)[MB][BM / 2], const Params& p, int n_base,
                                               int m0, unsigned buf) {
  using Acc = typename Op::Acc;
  constexpr int NG = MB * BM / 8, CH = (NG + CL - 1) / CL;
  const int r = cluster_rank();
  const unsigned mine = buf + threadIdx.x * 16;
  unsigned remote[CL];
#pragma unroll
  for (int o = 0; o < CL; ++o) remote[o] = cluster_map(mine, o);
  cluster_sync();
#pragma unroll
  for (int gi = 0; gi < NG; ++gi) {
    const int o = (gi * CL + CL - 1) / NG;  // the owner of group gi
    if (o == r) continue;
    const Acc* a = &acc[(4 * gi) / (BM / 2)][(4 * gi) % (BM / 2)];
    const int row = r < o ? r : r - 1;
    st_cluster_v4(remote[o] + (row * CH + gi - o * NG / CL) * NT * 16, acc_bits(a[0]), acc_bits(a[1]),
                  acc_bits(a[2]), acc_bits(a[3]));
  }
  cluster_sync();
  const int lo = r * NG / CL, hi = (r + 1) * NG / CL;
#pragma unroll
  for (int gi = 0; gi < NG; ++gi) {
    if (gi < lo || gi >= hi) continue;
    Acc* a = &acc[(4 * gi) / (BM / 2)][(4 * gi) % (BM / 2)];
#pragma unroll
    for (int row = 0; row < CL - 1; ++row) {
      unsigned v[4];
      ld_shared_v4(mine + (row * CH + gi - lo) * NT * 16, v);
#pragma unroll
      for (int e = 0; e < 4; ++e) a[e] = acc_add(a[e], v[e]);
    }
  }
  store_tile<Op, BM, MB, WS, BS>(acc, p, n_base, m0, lo, hi);
}

// Epilogue of one tile (n-tile nt of the m-tile) whose iterations [k0, k1) of ktiles this CTA ran. A whole tile is
// stored at once. A split tile is summed through slots instead of atomics. The piece that starts the tile (k0 = 0)
// is always the last thing its CTA runs; the other pieces (k0 > 0) always come first in theirs. So a later piece
// stores its accumulators, as they lie in its registers (16-byte stores, coalesced: thread t's values 4i..4i+3 at
// word (i * NT + t) * 4), into its CTA's slot, adds its k-tile count to the tile's counter with release semantics
// and goes on without waiting; the CTA holding k0 = 0 waits until the counter holds the other k-tiles, adds the
// other pieces' slots element-wise (the same thread mapping in every CTA), stores the tile and resets the counter.
// It waits only for pieces that CTAs of higher index run first in their ranges, and the grid is one resident wave
// (kernels.tensorcore.tensorcore.grid_ctas), so the wait cannot deadlock.
// Nothing needs zeroing between launches. (The first version summed into an fp32 workspace with one atomic per
// element; leaving the fix-up out made the kernels 1.6-2x faster at M = 128, docs/kernels-wgmma.md.)
// With CL > 1 the kernel runs as clusters of a tile's CL pieces, summed by finish_cluster.
template <class Op, int BM, int NT, int MB, int WS = 16, int BS = 64, int CL = 1>
__device__ __forceinline__ void finish_tile(typename Op::Acc (&acc)[MB][BM / 2], const Params& p, int n_base,
                                            int m0, int nt, int tiles_n, int k0, int k1, int ktiles,
                                            const StreamK& sk, unsigned buf = 0) {
  using Acc = typename Op::Acc;
  constexpr int PER = MB * BM / 2, SLOT = NT * PER;  // accumulators per thread, words per slot
  if constexpr (CL > 1) {
    finish_cluster<Op, BM, NT, MB, CL, WS, BS>(acc, p, n_base, m0, buf);
    return;
  }
  if (k0 == 0 && k1 == ktiles) {
    store_tile<Op, BM, MB, WS, BS>(acc, p, n_base, m0);
    return;
  }
  const int tid = threadIdx.x;
  int* counter = p.counters + blockIdx.y * tiles_n + nt;
  unsigned* slots = static_cast<unsigned*>(p.ws) + static_cast<long long>(blockIdx.y) * gridDim.x * 2 * SLOT;
  if (k0 > 0) {  // a later piece: the first tile of this CTA's range, so slot c
    unsigned* mine = slots + static_cast<long long>(blockIdx.x) * SLOT + tid * 4;
#pragma unroll
    for (int i = 0; i < PER / 4; ++i) {
      const Acc* a = &acc[(4 * i) / (BM / 2)][(4 * i) % (BM / 2)];
      st_v4(mine + i * NT * 4, acc_bits(a[0]), acc_bits(a[1]), acc_bits(a[2]), acc_bits(a[3]));
    }
    math_sync<NT>();  // every thread's stores precede thread 0's release (cumulative)
    if (tid == 0) red_release_add(counter, k1 - k0);
    return;
  }
  if (tid == 0)
    while (ld_acquire(counter) < ktiles - k1) asm volatile("nanosleep.u32 64;\n");
  math_sync<NT>();  // thread 0's acquire precedes every thread's reads of the slots
  const int c_last = sk.owner(nt * ktiles + ktiles - 1);
  for (int o = blockIdx.x + 1; o <= c_last; ++o) {
    const unsigned* theirs = slots + static_cast<long long>(o) * SLOT + tid * 4;
#pragma unroll
    for (int i = 0; i < PER / 4; ++i) {
      unsigned v[4];
      ld_v4(theirs + i * NT * 4, v);
      Acc* a = &acc[(4 * i) / (BM / 2)][(4 * i) % (BM / 2)];
#pragma unroll
      for (int e = 0; e < 4; ++e) a[e] = acc_add(a[e], v[e]);
    }
  }
  store_tile<Op, BM, MB, WS, BS>(acc, p, n_base, m0);
  if (tid == 0) *counter = 0;  // the next launch's pieces find it at zero (kernels of a stream do not overlap)
}

__device__ __forceinline__ void mbar_init(unsigned bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

// Thread 0 sets up the pipeline's mbarriers ("full": the producer's one arrival plus the bytes of its copies; "empty":
// one arrival per math warp), and the whole CTA waits for it.
template <int STAGES>
__device__ __forceinline__ void init_stage_barriers(unsigned long long (&full)[STAGES],
                                                    unsigned long long (&empty)[STAGES], int math_warps) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), math_warps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// 1-D bulk copy of `bytes` (a multiple of 16) contiguous bytes, completing on the mbarrier.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, int bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
}  // namespace wg

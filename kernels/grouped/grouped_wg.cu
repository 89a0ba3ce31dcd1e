// arch: sm_90a
// Grouped bf16 GEMM on the wgmma path (Hopper, sm_90a) for MoE decode at larger batch (issue 33): every touched
// expert of a layer in one launch, each (pass of an expert's rows, 64*WG-channel tile of its weights) one work item.
// Where an expert has tens of rows, grouped_tc.cu's GEMV-class tile (weights from global memory straight into mma.sync
// fragments) runs out of issue rate; here both operands sit in shared memory and one wgmma covers the pass's rows.
//
// Operands as wg_gemm.cu's: the expert's weights (plain K-contiguous bf16 rows, experts stacked [E * N, K]) are
// wgmma's A, 64 channels per warpgroup; the pass's x rows its B, gathered through the routed token list by cp.async
// into the 128-byte swizzle layout (x tiles laid out for BM_MAX rows; only the pass's rows are copied). The wgmma width
// is chosen per item: the smallest of 16, 32, 64, 128 (up to BM_MAX) holding the pass's rows, so an expert with 9 rows
// costs an n16 instruction and one with 70 an n128; columns past the pass's rows hold stale shared memory and their
// outputs are never stored (a column of D depends on its own column of B only).
//
// Work: items = (pass slot, n-tile), slots = one per BM_MAX rows of each touched expert (the slot table, built by warp
// 0 of every CTA from the offsets), dealt round-robin over a persistent grid; every item runs the whole K. The CTA's
// items form one stream of k-tiles (item q's k-tile t is step q * ktiles + t), so the cp.async pipeline runs on across
// item boundaries: the next item's first stages load while this one's last wgmmas and its epilogue run.
// Output y[R, N] in routed order (row start_e + m of expert e), as grouped_tc.cu's.
#include "grouped_common.cuh"
#include "wg_common.cuh"

#define GWG_MAX_SLOTS 2048

namespace gwg {
using namespace wg;

// One slot per pass of BM_MAX rows of each touched expert, in expert order: expert (low 16 bits) | pass (high 16),
// written by warp 0 with a warp scan of the passes; returns the slot count after a __syncthreads. The host keeps
// E + ceil(R / BM_MAX) <= GWG_MAX_SLOTS.
__device__ __forceinline__ int pass_slots(const int* offsets, int E, int bm_max, int* slots) {
  __shared__ int n;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int count = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      const int rows = e < E ? __ldg(offsets + e + 1) - __ldg(offsets + e) : 0;
      const int passes = (rows + bm_max - 1) / bm_max;
      int incl = passes;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += v;
      }
      for (int q = 0, first = count + incl - passes; q < passes && first + q < GWG_MAX_SLOTS; ++q)
        slots[first + q] = e | (q << 16);
      count += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) n = min(count, GWG_MAX_SLOTS);
  }
  __syncthreads();
  return n;
}

struct Item {
  int e;      // expert
  int first;  // routed row of the pass's first row (offsets[e] + pass * BM_MAX)
  int rows;   // rows in the pass (1 .. BM_MAX)
  int n0;     // first channel of the tile
};

__device__ __forceinline__ Item item_of(const int* slots, const int* offsets, int it, int tiles_n, int bw,
                                        int bm_max) {
  const int s = slots[it / tiles_n], e = s & 0xffff;
  const int first = __ldg(offsets + e) + (s >> 16) * bm_max;
  return Item{e, first, min(bm_max, __ldg(offsets + e + 1) - first), (it % tiles_n) * bw};
}

// Rows [0, valid) of the pass (x row rows[first + r] with gather, else first + r), bytes [kb, kb + KT), into the
// 128-byte swizzle layout of an R-row tile (load_tile's, wg_common.cuh); rows >= valid are not copied.
template <int R, int KT, int NT>
__device__ __forceinline__ void load_rows(unsigned dst, const unsigned char* x, const int* rows, int first, int valid,
                                          int gather, long long ld, long long kb) {
  constexpr int TOTAL = R * KT / 16;
#pragma unroll
  for (int j = 0; j < (TOTAL + NT - 1) / NT; ++j) {
    const int i = j * NT + static_cast<int>(threadIdx.x);
    if (TOTAL % NT != 0 && i >= TOTAL) break;
    const int c = i & 7, row = (i >> 3) % R, a = (i >> 3) / R;
    if (row < valid) {
      const long long xr = gather ? __ldg(rows + first + row) : first + row;
      cp_async16(dst + a * R * 128 + row * 128 + ((c ^ (row & 7)) << 4), x + xr * ld + kb + a * 128 + c * 16, 16);
    }
  }
}

template <int BM_MAX, int WG, int STAGES, int KT>
struct Pipe {
  static constexpr int NT = WG * 128, BW = 64 * WG, W_BYTES = BW * KT, STAGE = (BW + BM_MAX) * KT, NSTEP = KT / 32;
  const unsigned char* x;
  const unsigned char* W;
  const int* rows;
  const int* offsets;
  const int* slots;
  int N, k_bytes, ktiles, tiles_n, gather, total;
  unsigned sbase;

  // Issue the copies of step j (item j / ktiles of this CTA, its k-tile j % ktiles) into stage j % STAGES.
  __device__ __forceinline__ void load(int j) const {
    const Item it = item_of(slots, offsets, blockIdx.x + (j / ktiles) * gridDim.x, tiles_n, BW, BM_MAX);
    const long long kb = static_cast<long long>(j % ktiles) * KT;
    const unsigned s = sbase + (j % STAGES) * STAGE;
    load_tile<BW, KT, NT, false>(s, W + (static_cast<long long>(it.e) * N + it.n0) * k_bytes, BW, k_bytes, kb);
    load_rows<BM_MAX, KT, NT>(s + W_BYTES, x, rows, it.first, it.rows, gather, k_bytes, kb);
  }

  // Steps [j0, j0 + ktiles): one item's whole K on the n-BM wgmma, then its epilogue into y.
  template <int BM>
  __device__ __forceinline__ void item(int j0, const Item& it, unsigned short* y) const {
    const int g = threadIdx.x >> 7;
    float acc[1][BM / 2];
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) acc[0][i] = 0.f;
    for (int j = j0; j < j0 + ktiles; ++j) {
      cp_async_wait<STAGES - 3>();
      fence_proxy_async();  // this thread's copies of step j, visible to the async proxy ...
      __syncthreads();      // ... and every thread's; the wgmma of step j - 2 is done (wait_group 1 below)
      if (j + STAGES - 2 < total) load(j + STAGES - 2);
      cp_async_commit();
      const unsigned st = sbase + (j % STAGES) * STAGE, sw = st + g * 64 * 128, sx = st + W_BYTES;
      fence_acc(acc[0]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < NSTEP; ++ks) {
        const unsigned k_off = (ks & 3) * 32;
        Mma<BF16, BM>::run(acc[0], descriptor(sw + (ks >> 2) * BW * 128 + k_off),
                           descriptor(sx + (ks >> 2) * BM_MAX * 128 + k_off));
      }
      wgmma_commit();
      wgmma_wait<1>();
      fence_acc(acc[0]);
    }
    wgmma_wait<0>();
    fence_acc(acc[0]);
    const Params p{y + static_cast<long long>(it.first) * N, nullptr, nullptr, nullptr, nullptr, it.rows, N};
    store_tile<OpBF16, BM, 1, 16, 64>(acc, p, it.n0 + g * 64, 0);
  }
};

}  // namespace gwg

// grid: persistent (at most one CTA per SM), block WG * 128, dynamic shared memory STAGES * (64 * WG + BM_MAX) * KT +
// 1024 bytes; grouped_tc.cu's arguments. W: bf16 [E * N, K]; x: bf16 [B, K] (gather: rows[] picks them) or [R, K]
// in routed order; y: bf16 [R, N]. N a multiple of 64 * WG, K * 2 of KT.
template <int BM_MAX, int WG, int STAGES, int KT>
__global__ void __launch_bounds__(WG * 128, 1)
    grouped_wg_bf16(const unsigned char* __restrict__ W, const unsigned char* __restrict__ x,
                    unsigned short* __restrict__ y, const int* __restrict__ rows, const int* __restrict__ offsets,
                    int E, int N, int K, int gather) {
  static_assert(STAGES >= 3 && KT % 128 == 0 && (BM_MAX == 64 || BM_MAX == 128), "3+ stages, 128-byte k-atoms");
  using P = gwg::Pipe<BM_MAX, WG, STAGES, KT>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int slots[GWG_MAX_SLOTS];
  const int nslots = gwg::pass_slots(offsets, E, BM_MAX, slots);
  const int tiles_n = N / P::BW, ktiles = K * 2 / KT, items = nslots * tiles_n;
  const int mine = static_cast<int>(blockIdx.x) < items ? (items - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const P pipe{x, W, rows, offsets, slots, N, K * 2, ktiles, tiles_n, gather, mine * ktiles,
               (wg::smem_addr(smem) + 1023u) & ~1023u};
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < pipe.total) pipe.load(s);
    wg::cp_async_commit();
  }
  for (int q = 0; q < mine; ++q) {
    const gwg::Item it = gwg::item_of(slots, offsets, blockIdx.x + q * gridDim.x, tiles_n, P::BW, BM_MAX);
    const int j0 = q * ktiles;
    if (it.rows <= 16) {
      pipe.template item<16>(j0, it, y);
    } else if (it.rows <= 32) {
      pipe.template item<32>(j0, it, y);
    } else if (BM_MAX == 64 || it.rows <= 64) {
      pipe.template item<64>(j0, it, y);
    } else {
      pipe.template item<BM_MAX>(j0, it, y);
    }
  }
  wg::cp_async_wait<0>();
}

// The stream-K mainloop shared by the GEMMs whose operands are stored as plain row-major bytes: bf16/fp16 (two
// bytes per element), int8 and e4m3 (one). x[M,K] and W[N,K] are both "K-contiguous", so in units of 16 bytes they
// load alike: one k-step is 32 bytes of K (k16 of 16-bit types, k32 of 8-bit ones), and ldmatrix delivers the
// fragments of mma m16n8k16 (16-bit) and m16n8k32 (s8) from the same addresses. The Op supplies the mma (and any
// operand conversion) and the epilogue store.
//
// Tile: BM x BN outputs per CTA, KT bytes of K per k-tile (128 or 256: one barrier per k-tile), STAGES-deep
// cp.async pipeline, WM x WN warps, each warp (BM/WM) x (BN/WN) outputs. Shared memory per stage: (BM + BN) * KT
// bytes, swizzled (the XOR swizzle on the low three chunk bits keeps ldmatrix conflict-free for any KT >= 128).
#pragma once
#include "tc_common.cuh"

namespace tc {

template <class Op, int BM, int BN, int WM, int WN, int STAGES, int KT>
__device__ __forceinline__ void gemm_bytes(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                                           const Params& p, int k_bytes) {
  constexpr int NT = WM * WN * 32, WTM = BM / WM, WTN = BN / WN, MF = WTM / 16, NF = WTN / 8;
  constexpr int A_BYTES = BM * KT, STAGE_BYTES = (BM + BN) * KT, CHUNKS = KT / 16;
  constexpr int B_CHUNKS = BN * CHUNKS;
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16 x 16");
  static_assert(B_CHUNKS % NT == 0, "B tile chunks must divide among the threads");
  using Acc = typename Op::Acc;

  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int last_flag;
  const unsigned sbase = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp / WN, wn = warp % WN;
  const int tiles_n = p.N / BN, ktiles = k_bytes / KT, mt = blockIdx.y, m0 = mt * BM;
  const StreamK sk(tiles_n * ktiles);
  const int range_end = sk.begin(blockIdx.x + 1);

  for (int it = sk.begin(blockIdx.x); it < range_end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (range_end - it)), nk = k1 - k0, n0 = nt * BN;
    const unsigned char* Bt = B + static_cast<long long>(n0) * k_bytes;

    auto load_stage = [&](int stage, int kt) {
      const unsigned sa = sbase + stage * STAGE_BYTES, sb = sa + A_BYTES;
      load_a_tile<BM, KT, NT>(sa, A, p.M, m0, k_bytes, static_cast<long long>(kt) * KT);
#pragma unroll
      for (int j = 0; j < B_CHUNKS / NT; ++j) {
        const int i = j * NT + tid, row = i / CHUNKS, c = i % CHUNKS;
        cp_async16(sb + swz(row, c, KT), Bt + static_cast<long long>(row) * k_bytes + kt * KT + c * 16,
                   16);
      }
    };

    Acc acc[MF][NF][4];
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mf][nf][i] = Acc(0);

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nk) load_stage(s, k0 + s);
      cp_async_commit();
    }
    for (int i = 0; i < nk; ++i) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // stage i landed for every thread; stage i-1 is free to refill
      if (i + STAGES - 1 < nk) load_stage((i + STAGES - 1) % STAGES, k0 + i + STAGES - 1);
      cp_async_commit();
      const unsigned sa = sbase + (i % STAGES) * STAGE_BYTES, sb = sa + A_BYTES;
      // fragments of k-step ks + 1 are loaded before the mma of k-step ks (two register buffers)
      auto load_frags = [&](int ks, unsigned (&a)[MF][4], unsigned (&b)[NF][2]) {
#pragma unroll
        for (int mf = 0; mf < MF; ++mf) ldsm_a<KT>(sa, wm * WTM + mf * 16, ks, lane, a[mf]);
#pragma unroll
        for (int np = 0; np < NF / 2; ++np) {
          const int row = wn * WTN + np * 16 + ((lane >> 4) << 3) + (lane & 7), chunk = ks * 2 + ((lane >> 3) & 1);
          ldsm_x4(sb + swz(row, chunk, KT), b[2 * np][0], b[2 * np][1], b[2 * np + 1][0], b[2 * np + 1][1]);
        }
      };
      unsigned a[2][MF][4], b[2][NF][2];
      load_frags(0, a[0], b[0]);
#pragma unroll
      for (int ks = 0; ks < KT / 32; ++ks) {
        if (ks + 1 < KT / 32) load_frags(ks + 1, a[(ks + 1) & 1], b[(ks + 1) & 1]);
        Op::template mma<MF, NF>(acc, a[ks & 1], b[ks & 1]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages before the next range refills them
    finish_tile<Op, MF, NF>(acc, p, m0 + wm * WTM, n0 + wn * WTN, nt, tiles_n, k0, k1, ktiles, sk, &last_flag);
    it += nk;
  }
}

}  // namespace tc

// One extern "C" entry per tile configuration: NAME_m<BM>. Geometry: grid (CTAs, m-tiles), block WM*WN*32,
// dynamic shared memory STAGES * (BM + BN) * KT bytes.
#define TC_BYTES_ENTRY(NAME, OP, BM, BN, WM, WN, STAGES, KT)                                                       \
  extern "C" __global__ void __launch_bounds__(WM* WN * 32)                                                        \
      NAME##_m##BM(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B, void* out, void* ws,  \
                   int* counters, const float* sa, const float* sb, int M, int N, int k_bytes) {                   \
    const tc::Params p{out, ws, counters, sa, sb, M, N};                                                           \
    tc::gemm_bytes<OP, BM, BN, WM, WN, STAGES, KT>(A, B, p, k_bytes);                                              \
  }

// The configurations a byte-GEMM instantiates (BM, BN, WM, WN, STAGES, KT), one set per variant, chosen at compile
// time (NVRTC option -DTC_WIDE / -DTC_WIDE_KSPLIT / -DTC_WIDE_SUMSCALE); kernels/tensorcore/tensorcore.py holds the same table (VARIANTS) and picks the
// variant per M.
#if defined(TC_WIDE_KSPLIT) || defined(TC_WIDE_SUMSCALE)
// wide-ksplit (wide-sumscale differs only in the w4a16 kernel): wide with one more stage at BM = 16 and 64 (one CTA per SM).
#define TC_BYTES_ENTRIES(NAME, OP)                 \
  TC_BYTES_ENTRY(NAME, OP, 16, 128, 1, 8, 4, 256)  \
  TC_BYTES_ENTRY(NAME, OP, 32, 128, 2, 4, 4, 256)  \
  TC_BYTES_ENTRY(NAME, OP, 64, 128, 2, 4, 4, 256)  \
  TC_BYTES_ENTRY(NAME, OP, 128, 128, 2, 4, 3, 256) \
  TC_BYTES_ENTRY(NAME, OP, 256, 128, 4, 2, 4, 128)
#elif defined(TC_WIDE)
// wide: 8 warps, 256 bytes of K per barrier (BM <= 128), all of M = 256 in one CTA tile (weights streamed once).
#define TC_BYTES_ENTRIES(NAME, OP)                 \
  TC_BYTES_ENTRY(NAME, OP, 16, 128, 1, 8, 3, 256)  \
  TC_BYTES_ENTRY(NAME, OP, 32, 128, 2, 4, 4, 256)  \
  TC_BYTES_ENTRY(NAME, OP, 64, 128, 2, 4, 3, 256)  \
  TC_BYTES_ENTRY(NAME, OP, 128, 128, 2, 4, 3, 256) \
  TC_BYTES_ENTRY(NAME, OP, 256, 128, 4, 2, 4, 128)
#else
// narrow: the first, measured configuration: 4 warps, 128 bytes of K per barrier.
#define TC_BYTES_ENTRIES(NAME, OP)                 \
  TC_BYTES_ENTRY(NAME, OP, 16, 128, 1, 4, 4, 128)  \
  TC_BYTES_ENTRY(NAME, OP, 32, 128, 1, 4, 4, 128)  \
  TC_BYTES_ENTRY(NAME, OP, 64, 128, 2, 2, 4, 128)  \
  TC_BYTES_ENTRY(NAME, OP, 128, 128, 2, 2, 3, 128)
#endif

// W4A16 GEMM: int4 weights in groups of 128 along K (fp16 scale and zero per group), fp16 activations, FP16 tensor
// cores (mma.sync m16n8k16, fp32 accumulation). Marlin's ideas, our code:
// - weights reordered offline (kernels/quant/pack_tc.py) so that each thread's B fragments for one 128 x 128 tile arrive
//   as four 16-byte words, contiguous across the warp (shared memory reads without bank conflicts) and across the
//   CTA (one 8 KB coalesced cp.async stream per k-tile). No L2 evict-first hint: with createpolicy + cp.async
//   L2::cache_hint, the sm_90 build of the BM=32 variant reused the folded policy's uniform register for a shared
//   memory address in the pipelined refill and hit "illegal instruction" on the H200 (compute-sanitizer), so the
//   weights use plain cp.async.cg;
// - int4 -> fp16 in registers with the 0x6400 trick: (q & 0x000F000F) | 0x64006400 is the fp16 pair 1024 + q;
//   subtracting (1024 + z) is exact (nibbles in the high half of a byte come out as 1024 + 16q and take an exact fma
//   by 1/16 and -(64 + z) instead). Then either one multiply by the scale (the weight (q - z) * s rounded once to
//   fp16) or, with EPI, none: the mma sums (q - z) * x exactly per k-tile and the fp32 sums take the scale;
// - the group is the k-tile: one (scale, zero) pair per column per k-tile, packed next to the tile.
//
// Layout of one (n-tile nt, k-tile kt) block (tile id nt * ktiles + kt): 2048 words, word ((w*4 + j)*32 + lane)*4 + e
// is read by warp w (columns w*32..w*32+31), lane `lane`; it holds k-step ks = 2j + e/2 for the fragment pair
// np = e%2 (n-fragments 2np, 2np+1); nibble i = 4*hsel + 2*pp + reg is the weight at column
// w*32 + (2np+pp)*8 + lane/4, k = ks*16 + reg*8 + (lane%4)*2 + hsel. Scales: 128 half2 (scale, zero) per block,
// entry (w*8 + lane/4)*4 + nf for column w*32 + nf*8 + lane/4.
// Entries tc_gemm_w4a16_m<BM>: BM rows per CTA, BN = 128, BK = 128, 4 * WM * KW warps (see gemm_w4a16): with
// WM = 2 two warps dequantize the same weights for different rows, so a BM = 128/256 tile streams the weights once
// for all of M; with KW = 2 two warps split the k-steps of the same columns and rows.
#include "tc_common.cuh"

namespace tc {

constexpr int W4_BN = 128, W4_BK = 128, W4_BLOCK_BYTES = W4_BN * W4_BK / 2, W4_SCALE_BYTES = W4_BN * 4;

__device__ __forceinline__ unsigned h2_bits(__half2 h) { return *reinterpret_cast<unsigned*>(&h); }
__device__ __forceinline__ __half2 bits_h2(unsigned u) { return *reinterpret_cast<__half2*>(&u); }

struct W4Out {
  using Acc = float;
  __device__ __forceinline__ static void store(const Params& p, int row, int col, float v0, float v1) {
    __half* out = static_cast<__half*>(p.out) + static_cast<long long>(row) * p.N + col;
    *reinterpret_cast<__half2*>(out) = __floats2half2_rn(v0, v1);
  }
};

// One thread's B fragments for one 16-byte word (k-steps 2j, 2j+1 of the fragment pair np = e % 2): q - z exactly
// in fp16 (|q - z| <= 15), times the scale when SCALED (else the scale is applied to the fp32 sums per k-tile).
template <bool SCALED>
__device__ __forceinline__ void dequant_pair(unsigned w, const __half2& zlo, const __half2& zhi, const __half2& s,
                                             unsigned (&b)[2]) {
  const __half2 sixteenth = __float2half2_rn(0.0625f);
  const __half2 lo = __hsub2(bits_h2(lop3_and_or(w, 0x000F000Fu, 0x64006400u)), zlo);
  const __half2 hi = __hfma2(bits_h2(lop3_and_or(w, 0x00F000F0u, 0x64006400u)), sixteenth, zhi);
  b[0] = h2_bits(SCALED ? __hmul2(lo, s) : lo);
  b[1] = h2_bits(SCALED ? __hmul2(hi, s) : hi);
}

// BM rows per CTA, 4 * WM * KW warps: warp w takes columns (w % 4) * 32 (the packed layout's warp), rows
// ((w / 4) % WM) * BM / WM and the k-steps of k-split group (w / 4) / WM (KW groups split the 8 k-steps of a k-tile;
// their sums are added through shared memory before the epilogue). EPI: the group's scale multiplies the fp32 sums
// of each k-tile (one FFMA per accumulator per k-tile) instead of every dequantized weight pair (one HMUL2 each);
// cheaper while the warp holds few accumulators (BM / WM <= 32).
template <int BM, int WM, int KW, int STAGES, bool EPI>
__device__ __forceinline__ void gemm_w4a16(const unsigned char* __restrict__ A, const unsigned char* __restrict__ Bq,
                                           const unsigned char* __restrict__ SZ, const Params& p, int K) {
  constexpr int NT = 128 * WM * KW, WTM = BM / WM, MF = WTM / 16, NF = 4, ROWB = W4_BK * 2, JW = 4 / KW;
  static_assert(WTM % 16 == 0 && (W4_BLOCK_BYTES / 16) % NT == 0 && 4 % KW == 0, "bad w4a16 tile");
  constexpr int A_BYTES = BM * ROWB, STAGE_BYTES = A_BYTES + W4_BLOCK_BYTES + W4_SCALE_BYTES;
  static_assert(KW == 1 || (KW - 1) * 4 * WM * MF * NF * 4 * 32 * 4 <= STAGES * STAGE_BYTES, "k-split scratch");
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int last_flag;
  const unsigned sbase = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, warp = wid & 3;
  const int wrow = ((wid >> 2) % WM) * WTM, kgrp = (wid >> 2) / WM;
  const int tiles_n = p.N / W4_BN, ktiles = K / W4_BK, mt = blockIdx.y, m0 = mt * BM;
  const long long a_ld = static_cast<long long>(K) * 2;
  const StreamK sk(tiles_n * ktiles);
  const int range_end = sk.begin(blockIdx.x + 1);

  for (int it = sk.begin(blockIdx.x); it < range_end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (range_end - it)), nk = k1 - k0;

    auto load_stage = [&](int stage, int kt) {
      const unsigned sa = sbase + stage * STAGE_BYTES, sb = sa + A_BYTES, ss = sb + W4_BLOCK_BYTES;
      const long long block = static_cast<long long>(nt) * ktiles + kt;
      load_a_tile<BM, ROWB, NT>(sa, A, p.M, m0, a_ld, static_cast<long long>(kt) * ROWB);
      const unsigned char* src = Bq + block * W4_BLOCK_BYTES;
#pragma unroll
      for (int j = 0; j < W4_BLOCK_BYTES / 16 / NT; ++j) {
        const int i = j * NT + tid;
        cp_async16(sb + i * 16, src + i * 16, 16);
      }
      if (tid < W4_SCALE_BYTES / 16) cp_async16(ss + tid * 16, SZ + block * W4_SCALE_BYTES + tid * 16, 16);
    };

    float acc[MF][NF][4];
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mf][nf][i] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nk) load_stage(s, k0 + s);
      cp_async_commit();
    }
    for (int i = 0; i < nk; ++i) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (i + STAGES - 1 < nk) load_stage((i + STAGES - 1) % STAGES, k0 + i + STAGES - 1);
      cp_async_commit();
      const int stage = i % STAGES;
      const unsigned sa = sbase + stage * STAGE_BYTES;
      const unsigned char* sb = smem + stage * STAGE_BYTES + A_BYTES;
      const unsigned char* ss = sb + W4_BLOCK_BYTES;
      uint4 q[JW];
#pragma unroll
      for (int jw = 0; jw < JW; ++jw)
        q[jw] = *reinterpret_cast<const uint4*>(sb + ((warp * 4 + kgrp * JW + jw) * 32 + lane) * 16);
      const uint4 sz = *reinterpret_cast<const uint4*>(ss + (warp * 8 + (lane >> 2)) * 16);
      const unsigned szw[NF] = {sz.x, sz.y, sz.z, sz.w};
      __half2 scale[NF], zlo[NF], zhi[NF];
#pragma unroll
      for (int nf = 0; nf < NF; ++nf) {
        const __half2 v = bits_h2(szw[nf]);
        const __half2 z = __high2half2(v);
        scale[nf] = __low2half2(v);
        zlo[nf] = __hadd2(z, __float2half2_rn(1024.0f));
        zhi[nf] = __hneg2(__hadd2(z, __float2half2_rn(64.0f)));
      }
      float part[EPI ? MF : 1][NF][4];
      if constexpr (EPI) {
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
          for (int nf = 0; nf < NF; ++nf)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[mf][nf][e] = 0.0f;
      }
      // A fragments one k-step ahead of the mma that uses them
      unsigned a[2][MF][4];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf) ldsm_a<ROWB>(sa, wrow + mf * 16, kgrp * 2 * JW, lane, a[0][mf]);
#pragma unroll
      for (int jw = 0; jw < JW; ++jw) {
        const unsigned qw[4] = {q[jw].x, q[jw].y, q[jw].z, q[jw].w};
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int step = jw * 2 + jj, ks = kgrp * 2 * JW + step;
          if (step + 1 < 2 * JW) {
#pragma unroll
            for (int mf = 0; mf < MF; ++mf) ldsm_a<ROWB>(sa, wrow + mf * 16, ks + 1, lane, a[(step + 1) & 1][mf]);
          }
          unsigned b[NF][2];
#pragma unroll
          for (int np = 0; np < 2; ++np) {
            const unsigned w = qw[jj * 2 + np], w8 = w >> 8;
            dequant_pair<!EPI>(w, zlo[2 * np], zhi[2 * np], scale[2 * np], b[2 * np]);
            dequant_pair<!EPI>(w8, zlo[2 * np + 1], zhi[2 * np + 1], scale[2 * np + 1], b[2 * np + 1]);
          }
#pragma unroll
          for (int mf = 0; mf < MF; ++mf)
#pragma unroll
            for (int nf = 0; nf < NF; ++nf) {
              if constexpr (EPI) mma_f16(part[mf][nf], a[step & 1][mf], b[nf][0], b[nf][1]);
              else mma_f16(acc[mf][nf], a[step & 1][mf], b[nf][0], b[nf][1]);
            }
        }
      }
      if constexpr (EPI) {
        // accumulator element e sits at column (lane % 4) * 2 + e % 2 of its n-fragment: two scale words per nf
        const uint4 c0 = *reinterpret_cast<const uint4*>(ss + (warp * 8 + (lane & 3) * 2) * 16);
        const uint4 c1 = *reinterpret_cast<const uint4*>(ss + (warp * 8 + (lane & 3) * 2 + 1) * 16);
        const unsigned w0[NF] = {c0.x, c0.y, c0.z, c0.w}, w1[NF] = {c1.x, c1.y, c1.z, c1.w};
#pragma unroll
        for (int nf = 0; nf < NF; ++nf) {
          const float s0 = __low2float(bits_h2(w0[nf])), s1 = __low2float(bits_h2(w1[nf]));
#pragma unroll
          for (int mf = 0; mf < MF; ++mf) {
            acc[mf][nf][0] = fmaf(s0, part[mf][nf][0], acc[mf][nf][0]);
            acc[mf][nf][1] = fmaf(s1, part[mf][nf][1], acc[mf][nf][1]);
            acc[mf][nf][2] = fmaf(s0, part[mf][nf][2], acc[mf][nf][2]);
            acc[mf][nf][3] = fmaf(s1, part[mf][nf][3], acc[mf][nf][3]);
          }
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (KW > 1) {
      // k-split groups 1.. hand their sums to group 0 through the (now idle) pipeline buffers
      constexpr int PER = MF * NF * 4;
      float* red = reinterpret_cast<float*>(smem);
      const int slot = wid % (4 * WM);
      if (kgrp > 0) {
#pragma unroll
        for (int mf = 0; mf < MF; ++mf)
#pragma unroll
          for (int nf = 0; nf < NF; ++nf)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              red[(((kgrp - 1) * 4 * WM + slot) * PER + (mf * NF + nf) * 4 + e) * 32 + lane] = acc[mf][nf][e];
      }
      __syncthreads();
      if (kgrp == 0) {
#pragma unroll
        for (int g = 1; g < KW; ++g)
#pragma unroll
          for (int mf = 0; mf < MF; ++mf)
#pragma unroll
            for (int nf = 0; nf < NF; ++nf)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                acc[mf][nf][e] += red[(((g - 1) * 4 * WM + slot) * PER + (mf * NF + nf) * 4 + e) * 32 + lane];
      }
      __syncthreads();  // the next range's prologue refills these buffers
    }
    finish_tile<W4Out, MF, NF>(acc, p, m0 + wrow, nt * W4_BN + warp * 32, nt, tiles_n, k0, k1, ktiles, sk,
                               &last_flag, kgrp == 0);
    it += nk;
  }
}

}  // namespace tc

// Geometry: grid (CTAs, m-tiles), 128 * WM * KW threads, dynamic shared memory STAGES * (BM*256 + 8192 + 512) bytes.
#define TC_W4_ENTRY(BM, WM, KW, STAGES, EPI)                                                                         \
  extern "C" __global__ void __launch_bounds__(128 * WM * KW)                                                        \
      tc_gemm_w4a16_m##BM(const unsigned char* __restrict__ A, const unsigned char* __restrict__ Bq,                \
                          const unsigned char* __restrict__ SZ, void* out, void* ws, int* counters, int M, int N,    \
                          int K) {                                                                                   \
    const tc::Params p{out, ws, counters, nullptr, nullptr, M, N};                                                   \
    tc::gemm_w4a16<BM, WM, KW, STAGES, (EPI != 0)>(A, Bq, SZ, p, K);                                                 \
  }

// (BM, WM, KW, STAGES, EPI) per variant, selected with -DTC_WIDE / -DTC_WIDE_KSPLIT / -DTC_WIDE_SUMSCALE (none: narrow); the same table is
// kernels/tensorcore/tensorcore.py's VARIANTS.
#if defined(TC_WIDE_KSPLIT)
// wide-ksplit: the scale on the fp32 sums per k-tile and the k-steps split over two warp groups at small M (twice the warps
// per SM for the same shared memory).
TC_W4_ENTRY(16, 1, 2, 6, 1)
TC_W4_ENTRY(32, 1, 2, 4, 1)
TC_W4_ENTRY(64, 2, 1, 4, 0)
TC_W4_ENTRY(128, 2, 1, 4, 0)
TC_W4_ENTRY(256, 2, 1, 3, 0)
#elif defined(TC_WIDE_SUMSCALE)
// wide-sumscale: as wide-ksplit without the k-split (one warp group), deeper pipelines, and BM = 64 with two k-split groups of 4 warps.
TC_W4_ENTRY(16, 1, 1, 8, 1)
TC_W4_ENTRY(32, 1, 1, 6, 1)
TC_W4_ENTRY(64, 1, 2, 4, 0)
TC_W4_ENTRY(128, 2, 1, 4, 0)
TC_W4_ENTRY(256, 2, 1, 3, 0)
#elif defined(TC_WIDE)
// wide: deeper pipelines at small M (more bytes in flight per CTA); 8 warps and all of M in one tile from M = 64.
TC_W4_ENTRY(16, 1, 1, 8, 0)
TC_W4_ENTRY(32, 1, 1, 6, 0)
TC_W4_ENTRY(64, 2, 1, 4, 0)
TC_W4_ENTRY(128, 2, 1, 4, 0)
TC_W4_ENTRY(256, 2, 1, 3, 0)
#else
// narrow: the first, measured configuration (4 warps, BM <= 64: M > 64 runs several m-tiles).
TC_W4_ENTRY(16, 1, 1, 4, 0)
TC_W4_ENTRY(32, 1, 1, 4, 0)
TC_W4_ENTRY(64, 1, 1, 4, 0)
#endif

// W4A16 GEMM: int4 weights in groups of 128 along K (fp16 scale and zero per group), fp16 activations, FP16 tensor
// cores (mma.sync m16n8k16, fp32 accumulation). Marlin's ideas, our code:
// - weights reordered offline (kernels/pack_tc.py) so that each thread's B fragments for one 128 x 128 tile arrive
//   as four 16-byte words, contiguous across the warp (shared memory reads without bank conflicts) and across the
//   CTA (one 8 KB coalesced cp.async stream per k-tile). No L2 evict-first hint: with createpolicy + cp.async
//   L2::cache_hint, the sm_90 build of the BM=32 variant reused the folded policy's uniform register for a shared
//   memory address in the pipelined refill and hit "illegal instruction" on the H200 (compute-sanitizer), so the
//   weights use plain cp.async.cg;
// - int4 -> fp16 in registers with the 0x6400 trick: (q & 0x000F000F) | 0x64006400 is the fp16 pair 1024 + q;
//   subtracting (1024 + z) is exact, then one multiply by the scale (nibbles in the high half of a byte come out as
//   1024 + 16q and take an exact fma by 1/16 first). Weight (q - z) * s is rounded once to fp16;
// - the group is the k-tile: one (scale, zero) pair per column per k-tile, packed next to the tile.
//
// Layout of one (n-tile nt, k-tile kt) block (tile id nt * ktiles + kt): 2048 words, word ((w*4 + j)*32 + lane)*4 + e
// is read by warp w (columns w*32..w*32+31), lane `lane`; it holds k-step ks = 2j + e/2 for the fragment pair
// np = e%2 (n-fragments 2np, 2np+1); nibble i = 4*hsel + 2*pp + reg is the weight at column
// w*32 + (2np+pp)*8 + lane/4, k = ks*16 + reg*8 + (lane%4)*2 + hsel. Scales: 128 half2 (scale, zero) per block,
// entry (w*8 + lane/4)*4 + nf for column w*32 + nf*8 + lane/4.
// Entries tc_gemm_w4a16_m<BM>: BM rows per CTA, BN = 128, BK = 128, 4 * WM warps: warp w takes columns (w % 4) * 32
// (the packed layout's warp) and rows (w / 4) * BM / WM, so with WM = 2 two warps dequantize the same weights for
// different rows and a BM = 128/256 tile streams the weights once for all of M.
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

template <int BM, int WM, int STAGES>
__device__ __forceinline__ void gemm_w4a16(const unsigned char* __restrict__ A, const unsigned char* __restrict__ Bq,
                                           const unsigned char* __restrict__ SZ, const Params& p, int K) {
  constexpr int NT = 128 * WM, WTM = BM / WM, MF = WTM / 16, NF = 4, ROWB = W4_BK * 2;
  static_assert(WTM % 16 == 0 && (W4_BLOCK_BYTES / 16) % NT == 0, "bad w4a16 tile");
  constexpr int A_BYTES = BM * ROWB, STAGE_BYTES = A_BYTES + W4_BLOCK_BYTES + W4_SCALE_BYTES;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int last_flag;
  const unsigned sbase = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, wrow = (tid >> 7) * WTM;
  const int tiles_n = p.N / W4_BN, ktiles = K / W4_BK, mt = blockIdx.y, m0 = mt * BM;
  const long long a_ld = static_cast<long long>(K) * 2;
  const Range range = streamk_range(tiles_n * ktiles);
  const __half2 sixteenth = __float2half2_rn(0.0625f);

  for (int it = range.begin; it < range.end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (range.end - it)), nk = k1 - k0;

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
      const uint4 sz = *reinterpret_cast<const uint4*>(sb + W4_BLOCK_BYTES + (warp * 8 + (lane >> 2)) * 16);
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
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 q = *reinterpret_cast<const uint4*>(sb + ((warp * 4 + j) * 32 + lane) * 16);
        const unsigned qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          unsigned b[NF][2];
#pragma unroll
          for (int np = 0; np < 2; ++np) {
            const unsigned w = qw[jj * 2 + np], w8 = w >> 8;
            const int fa = 2 * np, fb = 2 * np + 1;
            const __half2 p0 = bits_h2((w & 0x000F000Fu) | 0x64006400u);
            const __half2 p1 = bits_h2((w & 0x00F000F0u) | 0x64006400u);
            const __half2 p2 = bits_h2((w8 & 0x000F000Fu) | 0x64006400u);
            const __half2 p3 = bits_h2((w8 & 0x00F000F0u) | 0x64006400u);
            b[fa][0] = h2_bits(__hmul2(__hsub2(p0, zlo[fa]), scale[fa]));
            b[fa][1] = h2_bits(__hmul2(__hfma2(p1, sixteenth, zhi[fa]), scale[fa]));
            b[fb][0] = h2_bits(__hmul2(__hsub2(p2, zlo[fb]), scale[fb]));
            b[fb][1] = h2_bits(__hmul2(__hfma2(p3, sixteenth, zhi[fb]), scale[fb]));
          }
          const int ks = 2 * j + jj;
#pragma unroll
          for (int mf = 0; mf < MF; ++mf) {
            unsigned a[4];
            ldsm_a<ROWB>(sa, wrow + mf * 16, ks, lane, a);
#pragma unroll
            for (int nf = 0; nf < NF; ++nf) mma_f16(acc[mf][nf], a, b[nf][0], b[nf][1]);
          }
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();
    finish_tile<W4Out, MF, NF>(acc, p, m0 + wrow, nt * W4_BN + warp * 32, mt * tiles_n + nt, k0, k1, ktiles, &last_flag);
    it += nk;
  }
}

}  // namespace tc

// Geometry: grid (CTAs, m-tiles), 128 * WM threads, dynamic shared memory STAGES * (BM*256 + 8192 + 512) bytes.
#define TC_W4_ENTRY(BM, WM, STAGES)                                                                                  \
  extern "C" __global__ void __launch_bounds__(128 * WM)                                                             \
      tc_gemm_w4a16_m##BM(const unsigned char* __restrict__ A, const unsigned char* __restrict__ Bq,                \
                          const unsigned char* __restrict__ SZ, void* out, void* ws, int* counters, int M, int N,    \
                          int K) {                                                                                   \
    const tc::Params p{out, ws, counters, nullptr, nullptr, M, N};                                                   \
    tc::gemm_w4a16<BM, WM, STAGES>(A, Bq, SZ, p, K);                                                                 \
  }

// (BM, WM, STAGES) per variant, selected with -DTC_V2; the same table is kernels/tensorcore.py's _VARIANTS.
#if defined(TC_V2)
// v2: deeper pipelines at small M (more bytes in flight per CTA); 8 warps and all of M in one tile from M = 64.
TC_W4_ENTRY(16, 1, 8)
TC_W4_ENTRY(32, 1, 6)
TC_W4_ENTRY(64, 2, 4)
TC_W4_ENTRY(128, 2, 4)
TC_W4_ENTRY(256, 2, 3)
#else
// v1: the first, measured configuration (4 warps, BM <= 64: M > 64 runs several m-tiles).
TC_W4_ENTRY(16, 1, 4)
TC_W4_ENTRY(32, 1, 4)
TC_W4_ENTRY(64, 1, 4)
#endif

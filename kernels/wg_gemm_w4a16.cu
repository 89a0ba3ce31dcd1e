// arch: sm_90a
// W4A16 GEMM on the warpgroup tensor cores (Hopper, sm_90a): y[M,N] = x[M,K] . dequant(W)[N,K]^T with int4 weights in
// groups of 128 along K (fp16 scale and zero per group), fp16 activations, fp32 accumulation, fp16 output.
//
// The weights are wgmma's A operand from registers, the activations its B from shared memory, so the batch is
// wgmma's N (16..128 per instruction). The weights keep the mma.sync kernel's offline layout (kernels/pack_tc.py):
// in one 128 x 128 block, warp w's 16-byte word j, element e, holds for k-step ks = 2j + e/2 the eight codes of
// channels {w*32 + 16 np + lane/4, + 8} (np = e % 2) at k = 16 ks + {2t, 2t+1, 2t+8, 2t+9} (t = lane % 4): exactly
// the m64k16 A fragment of a warp whose 16 rows are those two channel octets. A warpgroup therefore covers the
// block's 128 channels as two wgmma row blocks (np = 0, 1), each warp's rows permuted (the epilogue maps them back).
// Dequantization as in tc_gemm_w4a16.cu: the 0x6400 trick gives q - z exactly in fp16, one multiply by the scale.
//
// Pipeline: a producer warp fills each stage with the block's 8 KB of codes and 512 bytes of (scale, zero) pairs
// (1-D bulk copies) and the x tile (a TMA box per 128-byte atom, 128-byte swizzle, rows past M zero-filled), all
// completing on the stage's "full" mbarrier; the math warps read the codes into registers (four 16-byte loads),
// dequantize two k-steps at a time into one of two register sets and issue their wgmmas, keeping one wgmma group in
// flight while the next set is dequantized, and hand the stage back through its "empty" mbarrier. Stream-K over
// (n-tile of 128 * WG channels, k-tile of 128) as in wg_gemm.cu; split tiles summed in an fp32 workspace.
//
// Entry: template wg_gemm_w4a16<BM, WG, STAGES> (kernels/wgmma.py instantiates it by name expression).
#include "wg_common.cuh"

namespace wg {

constexpr int W4_BLOCK = 8192, W4_SCALES = 512;  // bytes of codes and of (scale, zero) pairs per 128 x 128 block

__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ unsigned hsub2(unsigned a, unsigned b) {
  unsigned d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ unsigned hadd2(unsigned a, unsigned b) {
  unsigned d;
  asm("add.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ unsigned hmul2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ unsigned hfma2(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Per column fragment nf (channel w*32 + 8 nf + lane/4): the scale and the two zero terms as fp16 pairs.
struct GroupScale {
  unsigned s[4], zlo[4], zhi[4];
};

__device__ __forceinline__ GroupScale group_scale(uint4 sz) {
  const unsigned v[4] = {sz.x, sz.y, sz.z, sz.w};  // (scale, zero) fp16 pairs
  GroupScale r;
#pragma unroll
  for (int nf = 0; nf < 4; ++nf) {
    const unsigned z = __byte_perm(v[nf], 0u, 0x3232);
    r.s[nf] = __byte_perm(v[nf], 0u, 0x1010);
    r.zlo[nf] = hadd2(z, 0x64006400u);           // 1024 + z
    r.zhi[nf] = hadd2(z, 0x54005400u) ^ 0x80008000u;  // -(64 + z)
  }
  return r;
}

// One code word -> the low (k 2t..2t+1) and high (k 2t+8..) fp16 pairs of (q - z) * s for column fragment nf.
__device__ __forceinline__ void dequant(unsigned w, const GroupScale& g, int nf, unsigned& lo, unsigned& hi) {
  lo = hmul2(hsub2(lop3_and_or(w, 0x000F000Fu, 0x64006400u), g.zlo[nf]), g.s[nf]);
  hi = hmul2(hfma2(lop3_and_or(w, 0x00F000F0u, 0x64006400u), 0x2C002C00u, g.zhi[nf]), g.s[nf]);  // 1024+16q: /16
}

// The A fragments of k-steps 2j and 2j+1 for both row blocks np from the word quadruple q (q[jj*2 + np]).
__device__ __forceinline__ void dequant_pair_of_steps(const uint4& q, const GroupScale& g, unsigned (&a)[2][2][4]) {
  const unsigned qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int jj = 0; jj < 2; ++jj)
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      const unsigned w = qw[jj * 2 + np];
      dequant(w, g, 2 * np, a[jj][np][0], a[jj][np][2]);           // rows lane/4: k lo, k hi
      dequant(w >> 8, g, 2 * np + 1, a[jj][np][1], a[jj][np][3]);  // rows lane/4 + 8
    }
}

template <int R>
__device__ __forceinline__ void fence_regs(unsigned (&r)[2][2][R]) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int k = 0; k < R; ++k) asm volatile("" : "+r"(r[i][j][k])::"memory");
}

template <int BM, int WG, int STAGES>
__device__ __forceinline__ void gemm_w4a16(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ Wq,
                                           const unsigned char* __restrict__ SZ, const Params& p, int K) {
  constexpr int NT = WG * 128, BW = 128 * WG, X_BYTES = BM * 256;
  constexpr int STAGE = (X_BYTES + WG * (W4_BLOCK + W4_SCALES) + 1023) / 1024 * 1024;
  static_assert(BM % 16 == 0 && BM <= 128 && STAGES >= 2, "BM 16..128, 2+ stages");
  using Mma = MmaRA<BM>;

  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  __shared__ int last_flag;
  const unsigned sbase = (smem_addr(smem) + 1023u) & ~1023u;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tiles_n = p.N / BW, ktiles = K / 128, m0 = blockIdx.y * BM;
  const int total = tiles_n * ktiles, q = total / static_cast<int>(gridDim.x), r = total % static_cast<int>(gridDim.x);
  const int c = static_cast<int>(blockIdx.x), begin = c * q + (c < r ? c : r), end = begin + q + (c < r ? 1 : 0);

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_addr(&full[s]), 1);
      mbar_init(smem_addr(&empty[s]), NT / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == NT / 32) {  // the producer warp
    if (lane == 0) {
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(map_x) : "memory");
      for (int it = begin, iter = 0; it < end; ++it, ++iter) {
        const int s = iter % STAGES, nt = it / ktiles, kt = it % ktiles;
        const unsigned st = sbase + s * STAGE, bar = smem_addr(&full[s]);
        mbar_wait(smem_addr(&empty[s]), ((iter / STAGES) & 1) ^ 1);
        mbar_expect_tx(bar, X_BYTES + WG * (W4_BLOCK + W4_SCALES));
        tma_load_2d(st, map_x, kt * 256, m0, bar);
        tma_load_2d(st + BM * 128, map_x, kt * 256 + 128, m0, bar);
#pragma unroll
        for (int g = 0; g < WG; ++g) {
          const long long blk = static_cast<long long>(nt * WG + g) * ktiles + kt;
          bulk_load(st + X_BYTES + g * W4_BLOCK, Wq + blk * W4_BLOCK, W4_BLOCK, bar);
          bulk_load(st + X_BYTES + WG * W4_BLOCK + g * W4_SCALES, SZ + blk * W4_SCALES, W4_SCALES, bar);
        }
      }
    }
    return;
  }

  const int g = warp >> 2, w = warp & 3;
  for (int it = begin, iter = 0; it < end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (end - it)), nk = k1 - k0;
    float acc[2][BM / 2];
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int i = 0; i < BM / 2; ++i) acc[b][i] = 0.0f;
    for (int i = 0; i < nk; ++i, ++iter) {
      const int s = iter % STAGES;
      const unsigned st = sbase + s * STAGE;
      mbar_wait(smem_addr(&full[s]), (iter / STAGES) & 1);
      const unsigned char* stage = smem + (st - smem_addr(smem));
      const uint4* codes = reinterpret_cast<const uint4*>(stage + X_BYTES + g * W4_BLOCK) + w * 128 + lane;
      const GroupScale gs = group_scale(*reinterpret_cast<const uint4*>(
          stage + X_BYTES + WG * W4_BLOCK + g * W4_SCALES + (w * 8 + (lane >> 2)) * 16));
      unsigned a[2][2][2][4];  // [register set][jj][np][fragment]
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wgmma_wait<1>();  // the group two back, which read register set j % 2, has completed
        if (j == 1 && i > 0 && lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
        dequant_pair_of_steps(codes[j * 32], gs, a[j & 1]);
        fence_regs(a[j & 1]);
#pragma unroll
        for (int b = 0; b < 2; ++b) fence_acc(acc[b]);
        wgmma_fence();
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const int ks = 2 * j + jj;  // x bytes 32 ks: atom ks / 4, offset 32 (ks % 4)
          const unsigned long long dx = descriptor(st + (ks >> 2) * BM * 128 + (ks & 3) * 32);
#pragma unroll
          for (int np = 0; np < 2; ++np) {
            const unsigned* f = a[j & 1][jj][np];
            Mma::run(acc[np], f[0], f[1], f[2], f[3], dx);
          }
        }
        wgmma_commit();
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < 2; ++b) fence_acc(acc[b]);
    if (lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
    finish_tile<OpFP16, BM, NT, 2, 32, 16>(acc, p, nt * BW + g * 128, m0, blockIdx.y * tiles_n + nt, k0, k1, ktiles,
                                          &last_flag);
    it += nk;
  }
}

}  // namespace wg

// grid (CTAs, m-tiles), block WG*128 + 32 (the last warp produces); map_x = the 128-byte tensor map of x (fp16,
// viewed as bytes) in global memory; w / sz = kernels.pack_tc's words and (scale, zero) pairs; dynamic shared memory
// STAGES * round_up(BM*256 + WG*8704, 1024) + 1024 bytes; N a multiple of 128*WG, K of 128.
template <int BM, int WG, int STAGES>
__global__ void __launch_bounds__(WG * 128 + 32, 1)
    wg_gemm_w4a16(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ w,
                  const unsigned char* __restrict__ sz, void* out, void* ws, int* counters, int M, int N, int K) {
  const wg::Params p{out, ws, counters, nullptr, nullptr, M, N};
  wg::gemm_w4a16<BM, WG, STAGES>(map_x, w, sz, p, K);
}

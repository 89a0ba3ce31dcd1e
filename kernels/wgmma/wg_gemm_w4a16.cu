// arch: sm_90a
// W4A16 GEMM on the warpgroup tensor cores (Hopper, sm_90a): y[M,N] = x[M,K] . dequant(W)[N,K]^T with int4 weights in
// groups of 128 along K (fp16 scale and zero per group), fp16 activations, fp32 accumulation, fp16 output.
//
// The weights are wgmma's A operand from registers, the activations its B from shared memory, so the batch is
// wgmma's N (16..128 per instruction). The weights keep the mma.sync kernel's offline layout (kernels/quant/pack_tc.py):
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
// (n-tile of 64 * WG * MB channels, k-tile of 128) as in wg_gemm.cu; split tiles summed through per-CTA slots.
//
// Channels per warpgroup: MB = 2 (a warpgroup takes a whole 128-channel block, both row blocks) or MB = 1 (the two
// row blocks np = 0, 1 of a block go to two warpgroups: half the dequantization and the accumulators per warpgroup,
// two independent wgmma chains per block; the warpgroup reads its words of each 16-byte load and drops the others).
//
// Entries: templates wg_gemm_w4a16<BM, WG, MB, STAGES> and wg_gemm_w4a16_cluster<..., CL> (kernels/wgmma/wgmma.py
// instantiates them by name expression).
#include "ptx.cuh"
#include "wg_common.cuh"

namespace wg {

constexpr int W4_BLOCK = 8192, W4_SCALES = 512;  // bytes of codes and of (scale, zero) pairs per 128 x 128 block

// Per column fragment nf of the warpgroup (channel w*32 + 8 nf' + lane/4 for the block's fragment nf'): the scale
// and the two zero terms as fp16 pairs. NF = 4 when the warpgroup takes both row blocks of its channels, 2 when one.
template <int NF>
struct GroupScale {
  unsigned s[NF], zlo[NF], zhi[NF];
};

template <int NF>
__device__ __forceinline__ GroupScale<NF> group_scale(const unsigned (&v)[NF]) {  // (scale, zero) fp16 pairs
  GroupScale<NF> r;
#pragma unroll
  for (int nf = 0; nf < NF; ++nf) {
    const unsigned z = __byte_perm(v[nf], 0u, 0x3232);
    r.s[nf] = __byte_perm(v[nf], 0u, 0x1010);
    r.zlo[nf] = hadd2(z, 0x64006400u);           // 1024 + z
    r.zhi[nf] = hadd2(z, 0x54005400u) ^ 0x80008000u;  // -(64 + z)
  }
  return r;
}

// One code word -> the low (k 2t..2t+1) and high (k 2t+8..) fp16 pairs of (q - z) * s for column fragment nf.
template <int NF>
__device__ __forceinline__ void dequant(unsigned w, const GroupScale<NF>& g, int nf, unsigned& lo, unsigned& hi) {
  lo = hmul2(hsub2(lop3_and_or(w, 0x000F000Fu, 0x64006400u), g.zlo[nf]), g.s[nf]);
  hi = hmul2(hfma2(lop3_and_or(w, 0x00F000F0u, 0x64006400u), 0x2C002C00u, g.zhi[nf]), g.s[nf]);  // 1024+16q: /16
}

// The A fragment of one wgmma (rows lane/4 and lane/4 + 8 of the warp's 16) from the code word of its row block.
template <int NF>
__device__ __forceinline__ void dequant_step(unsigned w, const GroupScale<NF>& g, int nf0, unsigned (&a)[4]) {
  dequant(w, g, nf0, a[0], a[2]);           // rows lane/4: k lo, k hi
  dequant(w >> 8, g, nf0 + 1, a[1], a[3]);  // rows lane/4 + 8
}

__device__ __forceinline__ void fence_regs(unsigned (&r)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(r[i][k])::"memory");
}

template <int BM, int WG, int MB, int STAGES, int CL = 1>
__device__ __forceinline__ void gemm_w4a16(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ Wq,
                                           const unsigned char* __restrict__ SZ, const Params& p, int K) {
  constexpr int NT = WG * 128, NB = WG * MB / 2, BW = 128 * NB, X_BYTES = BM * 256, NF = 2 * MB;
  constexpr int STAGE = (X_BYTES + NB * (W4_BLOCK + W4_SCALES) + 1023) / 1024 * 1024;
  constexpr int GROUPS = 2 * MB;  // wgmma groups per k-tile, 4 wgmmas each (MB = 2: 2 k-steps x 2 row blocks)
  static_assert(BM % 16 == 0 && BM <= 128 && STAGES >= 2, "BM 16..128, 2+ stages");
  static_assert((MB == 1 || MB == 2) && (WG * MB) % 2 == 0, "whole 128-channel blocks per CTA");
  using Mma = MmaRA<BM>;

  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned sbase = (smem_addr(smem) + 1023u) & ~1023u;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tiles_n = p.N / BW, ktiles = K / 128, m0 = blockIdx.y * BM;
  const StreamK sk(tiles_n, ktiles);
  const int begin = sk.begin(blockIdx.x), end = sk.begin(blockIdx.x + 1);

  init_stage_barriers(full, empty, NT / 32);

  if (warp == NT / 32) {  // the producer warp
    if (lane == 0) {
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(map_x) : "memory");
      for (int it = begin, iter = 0; it < end; ++it, ++iter) {
        const int s = iter % STAGES, nt = it / ktiles, kt = it % ktiles;
        const unsigned st = sbase + s * STAGE, bar = smem_addr(&full[s]);
        mbar_wait(smem_addr(&empty[s]), ((iter / STAGES) & 1) ^ 1);
        mbar_expect_tx(bar, X_BYTES + NB * (W4_BLOCK + W4_SCALES));
        tma_load_2d(st, map_x, kt * 256, m0, bar);
        tma_load_2d(st + BM * 128, map_x, kt * 256 + 128, m0, bar);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          const long long blk = static_cast<long long>(nt * NB + b) * ktiles + kt;
          bulk_load(st + X_BYTES + b * W4_BLOCK, Wq + blk * W4_BLOCK, W4_BLOCK, bar);
          bulk_load(st + X_BYTES + NB * W4_BLOCK + b * W4_SCALES, SZ + blk * W4_SCALES, W4_SCALES, bar);
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

  const int g = warp >> 2, w = warp & 3;
  const int blk = MB == 2 ? g : g >> 1, np0 = MB == 2 ? 0 : (g & 1);  // the block, the first row block
  for (int it = begin, iter = 0; it < end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (end - it)), nk = k1 - k0;
    float acc[MB][BM / 2];
#pragma unroll
    for (int b = 0; b < MB; ++b)
#pragma unroll
      for (int i = 0; i < BM / 2; ++i) acc[b][i] = 0.0f;
    for (int i = 0; i < nk; ++i, ++iter) {
      const int s = iter % STAGES;
      const unsigned st = sbase + s * STAGE;
      mbar_wait(smem_addr(&full[s]), (iter / STAGES) & 1);
      const unsigned char* stage = smem + (st - smem_addr(smem));
      const uint4* codes = reinterpret_cast<const uint4*>(stage + X_BYTES + blk * W4_BLOCK) + w * 128 + lane;
      const uint4 sz = *reinterpret_cast<const uint4*>(stage + X_BYTES + NB * W4_BLOCK + blk * W4_SCALES +
                                                       (w * 8 + (lane >> 2)) * 16);
      unsigned szw[NF];
      if constexpr (MB == 2) {
        szw[0] = sz.x, szw[1] = sz.y, szw[2] = sz.z, szw[3] = sz.w;
      } else {
        szw[0] = np0 ? sz.z : sz.x, szw[1] = np0 ? sz.w : sz.y;
      }
      const GroupScale<NF> gs = group_scale<NF>(szw);
      unsigned a[2][4][4];  // [register set][wgmma of the group][fragment]
#pragma unroll
      for (int gi = 0; gi < GROUPS; ++gi) {
        wgmma_wait<1>();  // the group two back, which read register set gi % 2, has completed
        if (gi == 1 && i > 0 && lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
        unsigned (&f)[4][4] = a[gi & 1];
        if constexpr (MB == 2) {  // word e of load j: k-step 2j + e/2, row block e % 2
          const uint4 qv = codes[gi * 32];
          const unsigned qw[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
          for (int m = 0; m < 4; ++m) dequant_step(qw[m], gs, 2 * (m & 1), f[m]);
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint4 qv = codes[(2 * gi + h) * 32];
            dequant_step(np0 ? qv.y : qv.x, gs, 0, f[2 * h]);
            dequant_step(np0 ? qv.w : qv.z, gs, 0, f[2 * h + 1]);
          }
        }
        fence_regs(f);
#pragma unroll
        for (int b = 0; b < MB; ++b) fence_acc(acc[b]);
        wgmma_fence();
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int ks = MB == 2 ? 2 * gi + (m >> 1) : 4 * gi + m;  // x bytes 32 ks: atom ks / 4, offset 32 (ks % 4)
          const unsigned long long dx = descriptor(st + (ks >> 2) * BM * 128 + (ks & 3) * 32);
          Mma::run(acc[MB == 2 ? (m & 1) : 0], f[m][0], f[m][1], f[m][2], f[m][3], dx);
        }
        wgmma_commit();
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < MB; ++b) fence_acc(acc[b]);
    if (lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
    finish_tile<OpFP16, BM, NT, MB, 32, 16, CL>(acc, p, nt * BW + blk * 128 + np0 * 16, m0, nt, tiles_n, k0, k1,
                                               ktiles, sk, sbase);
    it += nk;
  }
}

}  // namespace wg

// grid (CTAs, m-tiles), block WG*128 + 32 (the last warp produces), 64*WG*MB channels per CTA; map_x = the 128-byte
// tensor map of x (fp16, viewed as bytes) in global memory; w / sz = kernels.quant.pack_tc's words and (scale, zero) pairs; dynamic shared memory
// STAGES * round_up(BM*256 + NB*8704, 1024) + 1024 bytes with NB = WG*MB/2 blocks; N a multiple of 128*NB, K of 128.
template <int BM, int WG, int MB, int STAGES>
__global__ void __launch_bounds__(WG * 128 + 32, 1)
    wg_gemm_w4a16(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ w,
                  const unsigned char* __restrict__ sz, void* out, void* ws, int* counters, int M, int N, int K) {
  const wg::Params p{out, ws, counters, nullptr, nullptr, M, N};
  wg::gemm_w4a16<BM, WG, MB, STAGES>(map_x, w, sz, p, K);
}

// As clusters of a split tile's CL pieces (2..8), summed in distributed shared memory (finish_cluster).
template <int BM, int WG, int MB, int STAGES, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(WG * 128 + 32, 1)
    wg_gemm_w4a16_cluster(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ w,
                          const unsigned char* __restrict__ sz, void* out, void* ws, int* counters, int M, int N,
                          int K) {
  const wg::Params p{out, ws, counters, nullptr, nullptr, M, N};
  wg::gemm_w4a16<BM, WG, MB, STAGES, CL>(map_x, w, sz, p, K);
}

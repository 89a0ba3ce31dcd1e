// arch: sm_90a
// W8A16 GEMM on the warpgroup tensor cores (Hopper, sm_90a): y[m][n] = s[n] sum_k x[m][k] q[n][k] with int8 weights q
// (per-channel symmetric: one scale s[n] per output channel, the W8A16 scheme of kernels/quant/quant.py), fp16 or bf16
// activations and output (Op: OpW8F16 / OpW8BF16), fp32 accumulation over all of K.
//
// As wg_gemm_w4a16.cu: the weights are wgmma's A operand from registers, the activations its B from shared memory (a
// TMA box per 128-byte atom, 128-byte swizzle, rows past M zero-filled), so the batch is wgmma's N (16..256). Because
// the scale is per channel it factors out of the K sum: the A fragments are the integers q themselves, converted to
// fp16 / bf16 exactly, and s[n] multiplies each fp32 sum once in the epilogue (store_tile's channel scale).
//
// Layout (kernels/quant/pack_q8.py pack_w8a16_wg, offline): blocks of 64 channels x 64 k (4 KB), K-major per 64-channel
// row block ([N/64][K/64][4 KB]); in a block, warp w's 16-byte word j (0, 1) of lane (g = lane/4, t = lane%4) holds
// k-steps ks = 2j, 2j + 1 (16 k each) as two word pairs: word 0 = (ch g, k 2t), (ch g, 2t+1), (ch g+8, 2t),
// (ch g+8, 2t+1), word 1 the same at k 2t+8, 2t+9, channels 16 w + g of the block: the m64k16 A fragment of warp w,
// in register order, every byte stored as q + 128 (q ^ 0x80).
// int8 -> 16 bits, exactly, per 4-byte word (two A registers):
//   fp16: prmt places byte u in the low byte of 0x64uu (= 1024 + u); one hsub2 of 1152 gives q (1 prmt + 1 hsub2 per
//         register).
//   bf16: prmt places u in the low byte of fp32 0x4B0000uu (= 2^23 + u), one FADD of -(2^23 + 128) gives q, whose upper
//         16 bits are bf16(q); one prmt packs two (2 prmt + 2 FADD + 1 prmt per register).
//
// Pipeline: a producer warp fills each stage with the x tile and NB blocks' KT * 64 bytes of codes (one 1-D bulk copy
// per 64-channel block), completing on the stage's "full" mbarrier; each math warp reads its 16-byte words (one per
// two k-steps and block), converts them into one of two register sets and issues the wgmmas, keeping one wgmma group in
// flight while the next set is converted, and hands the stage back through its "empty" mbarrier. Stream-K over
// (n-tile of 64 * WG * MB channels, k-tile of KT), split tiles summed through per-CTA slots or in a cluster (finish_tile).
//
// Entries: templates wg_gemm_w8a16<Op, BM, WG, MB, STAGES, KT> and wg_gemm_w8a16_cluster<..., CL> (instantiated by
// name expression from kernels/wgmma/wg_w8a16.py).
#include "ptx.cuh"
#include "wg_common.cuh"

namespace wg {

constexpr int W8_CHUNK = 4096;  // bytes of codes per 64 channels x 64 k

// Threads per CTA: WG math warpgroups and a producer warp; with two math warpgroups, a whole producer warpgroup that
// gives its registers to them (setmaxnreg: 40 for it, 232 for the math threads; ptxas otherwise caps all at 168,
// and a 128 x 128 accumulator tile per warpgroup spills).
__host__ __device__ constexpr int w8_threads(int wg) { return wg * 128 + (wg == 2 ? 128 : 32); }

struct OpW8F16 {  // fp16 x and y; the channel's scale on the fp32 sum
  using T = F16;
  using Acc = float;
  static constexpr bool scaled = true, per_token = false;
  static constexpr int promote_bytes = 0;
  __device__ __forceinline__ static unsigned short out(float v, float, float sb) { return f32_to_f16(v * sb); }
};

struct OpW8BF16 {  // bf16 x and y
  using T = BF16;
  using Acc = float;
  static constexpr bool scaled = true, per_token = false;
  static constexpr int promote_bytes = 0;
  __device__ __forceinline__ static unsigned short out(float v, float, float sb) { return f32_to_bf16(v * sb); }
};

// One word of four biased bytes (u = q + 128) -> the 16-bit pairs {q0, q1}, {q2, q3} of type T.
template <class T>
__device__ __forceinline__ void to_pairs(unsigned w, unsigned& lo, unsigned& hi);

template <>
__device__ __forceinline__ void to_pairs<F16>(unsigned w, unsigned& lo, unsigned& hi) {
  lo = hsub2(__byte_perm(w, 0x64646464u, 0x4140), 0x64806480u);  // (1024 + u0, 1024 + u1) - 1152
  hi = hsub2(__byte_perm(w, 0x64646464u, 0x4342), 0x64806480u);
}

template <>
__device__ __forceinline__ void to_pairs<BF16>(unsigned w, unsigned& lo, unsigned& hi) {
  const float f0 = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650)) - 8388736.f;
  const float f1 = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7651)) - 8388736.f;
  const float f2 = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7652)) - 8388736.f;
  const float f3 = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7653)) - 8388736.f;
  lo = __byte_perm(__float_as_uint(f0), __float_as_uint(f1), 0x7632);
  hi = __byte_perm(__float_as_uint(f2), __float_as_uint(f3), 0x7632);
}

// One 16-byte word (k-steps 2j, 2j + 1) -> the A fragments {g lo, g+8 lo, g hi, g+8 hi} of both k-steps.
template <class T>
__device__ __forceinline__ void to_fragments(const uint4& v, unsigned (&f)[2][4]) {
  to_pairs<T>(v.x, f[0][0], f[0][1]);
  to_pairs<T>(v.y, f[0][2], f[0][3]);
  to_pairs<T>(v.z, f[1][0], f[1][1]);
  to_pairs<T>(v.w, f[1][2], f[1][3]);
}

template <int MB>
__device__ __forceinline__ void fence_frag(unsigned (&r)[MB][2][4]) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(r[b][s][k])::"memory");
}

template <class Op, int BM, int WG, int MB, int STAGES, int KT, int CL = 1>
__device__ __forceinline__ void gemm_w8a16(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ Wq,
                                           const Params& p, int K) {
  constexpr int NT = WG * 128, NB = WG * MB, BW = 64 * NB, X_BYTES = BM * KT * 2, W_BYTES = KT * 64;
  constexpr int STAGE = (X_BYTES + NB * W_BYTES + 1023) / 1024 * 1024;
  // 16-byte words (two k-steps each) per block and wgmma group: 4 wgmmas per group where a k-tile still holds two
  // groups (the register sets alternate within a k-tile, and the previous stage is released at its second group)
  constexpr int WPG = MB == 1 && KT == 128 ? 2 : 1;
  constexpr int GROUPS = KT / 32 / WPG;  // wgmma groups per k-tile
  static_assert(GROUPS >= 2 && WG <= 2 && BM % 16 == 0 && BM * MB <= 256 && STAGES >= 2 && (KT == 64 || KT == 128), "BM*MB <= 256, KT 64/128");
  using Mma = MmaRA<BM, typename Op::T>;

  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned sbase = (smem_addr(smem) + 1023u) & ~1023u;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tiles_n = p.N / BW, ktiles = K / KT, chunks = K / 64, m0 = blockIdx.y * BM;
  const StreamK sk(tiles_n, ktiles);
  const int begin = sk.begin(blockIdx.x), end = sk.begin(blockIdx.x + 1);

  init_stage_barriers(full, empty, NT / 32);

  if (warp >= NT / 32) {  // the producer warp(s)
    if constexpr (WG == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (warp == NT / 32 && lane == 0) {
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(map_x) : "memory");
      for (int it = begin, iter = 0; it < end; ++it, ++iter) {
        const int s = iter % STAGES, nt = it / ktiles, kt = it % ktiles;
        const unsigned st = sbase + s * STAGE, bar = smem_addr(&full[s]);
        mbar_wait(smem_addr(&empty[s]), ((iter / STAGES) & 1) ^ 1);
        mbar_expect_tx(bar, X_BYTES + NB * W_BYTES);
#pragma unroll
        for (int a = 0; a < KT / 64; ++a) tma_load_2d(st + a * BM * 128, map_x, kt * KT * 2 + a * 128, m0, bar);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          const long long chunk = static_cast<long long>(nt * NB + b) * chunks + kt * (KT / 64);
          bulk_load(st + X_BYTES + b * W_BYTES, Wq + chunk * W8_CHUNK, W_BYTES, bar);
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

  if constexpr (WG == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int g = warp >> 2, w = warp & 3;
  for (int it = begin, iter = 0; it < end;) {
    const int nt = it / ktiles, k0 = it % ktiles;
    const int k1 = min(ktiles, k0 + (end - it)), nk = k1 - k0;
    float acc[MB][BM / 2];
#pragma unroll
    for (int b = 0; b < MB; ++b)
#pragma unroll
      for (int i = 0; i < BM / 2; ++i) acc[b][i] = 0.0f;
#pragma unroll
    for (int b = 0; b < MB; ++b) fence_acc(acc[b]);  // the zeros defined here, not inside the first wgmma group
    for (int i = 0; i < nk; ++i, ++iter) {
      const int s = iter % STAGES;
      const unsigned st = sbase + s * STAGE;
      mbar_wait(smem_addr(&full[s]), (iter / STAGES) & 1);
      const unsigned char* stage = smem + (st - smem_addr(smem));
      // block b of this warpgroup, word j of chunk c: X_BYTES + (g MB + b) W_BYTES + c 4096 + w 1024 + j 512 + lane 16
      const uint4* codes = reinterpret_cast<const uint4*>(stage + X_BYTES + g * MB * W_BYTES) + w * 64 + lane;
      unsigned f[2][MB * WPG][2][4];  // [register set][block, word][k-step of the word][fragment]
#pragma unroll
      for (int gi = 0; gi < GROUPS; ++gi) {
        wgmma_wait<1>();  // the group two back, which read register set gi % 2, has completed
        if (gi == 1 && i > 0 && lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
#pragma unroll
        for (int b = 0; b < MB; ++b)
#pragma unroll
          for (int q = 0; q < WPG; ++q) {
            const int u = gi * WPG + q;  // word u of the k-tile: chunk u / 2, word u % 2
            to_fragments<typename Op::T>(codes[b * (W_BYTES / 16) + (u >> 1) * 256 + (u & 1) * 32], f[gi & 1][b * WPG + q]);
          }
        unsigned long long dx[2 * WPG];  // the x descriptors, all defined before the group's first wgmma
#pragma unroll
        for (int h = 0; h < 2 * WPG; ++h) {
          const int ks = 2 * WPG * gi + h;  // x bytes 32 ks: atom ks / 4, offset 32 (ks % 4)
          dx[h] = descriptor(st + (ks >> 2) * BM * 128 + (ks & 3) * 32);
          asm volatile("" : "+l"(dx[h])::"memory");
        }
        fence_frag<MB * WPG>(f[gi & 1]);
#pragma unroll
        for (int b = 0; b < MB; ++b) fence_acc(acc[b]);
        wgmma_fence();
#pragma unroll
        for (int h = 0; h < 2 * WPG; ++h)
#pragma unroll
          for (int b = 0; b < MB; ++b) {
            const unsigned(&a)[4] = f[gi & 1][b * WPG + (h >> 1)][h & 1];
            Mma::run(acc[b], a[0], a[1], a[2], a[3], dx[h]);
          }
        wgmma_commit();
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < MB; ++b) fence_acc(acc[b]);
    if (lane == 0) mbar_arrive(smem_addr(&empty[(iter - 1) % STAGES]));
    finish_tile<Op, BM, NT, MB, 16, 64, CL>(acc, p, nt * BW + g * MB * 64, m0, nt, tiles_n, k0, k1, ktiles, sk, sbase);
    it += nk;
  }
}

}  // namespace wg

// grid (CTAs, m-tiles), block WG*128 + 32 (the last warp produces), 64*WG*MB channels per CTA; map_x = the 128-byte
// tensor map of x (2-byte elements, viewed as bytes); w = kernels.quant.pack_q8.pack_w8a16_wg's words; sb = fp32
// channel scales; dynamic shared memory STAGES * round_up(BM*KT*2 + WG*MB*KT*64, 1024) + 1024 bytes; N a multiple of
// 64*WG*MB, K of KT.
template <class Op, int BM, int WG, int MB, int STAGES, int KT>
__global__ void __launch_bounds__(wg::w8_threads(WG), 1)
    wg_gemm_w8a16(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ w,
                  const float* __restrict__ sb, void* out, void* ws, int* counters, int M, int N, int K) {
  const wg::Params p{out, ws, counters, nullptr, sb, M, N};
  wg::gemm_w8a16<Op, BM, WG, MB, STAGES, KT>(map_x, w, p, K);
}

// As clusters of a split tile's CL pieces (2..8), summed in distributed shared memory (finish_cluster).
template <class Op, int BM, int WG, int MB, int STAGES, int KT, int CL>
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(wg::w8_threads(WG), 1)
    wg_gemm_w8a16_cluster(const unsigned char* __restrict__ map_x, const unsigned char* __restrict__ w,
                          const float* __restrict__ sb, void* out, void* ws, int* counters, int M, int N, int K) {
  const wg::Params p{out, ws, counters, nullptr, sb, M, N};
  wg::gemm_w8a16<Op, BM, WG, MB, STAGES, KT, CL>(map_x, w, p, K);
}

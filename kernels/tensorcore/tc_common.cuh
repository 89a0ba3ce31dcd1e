// Shared device code of the tensor-core GEMM kernels (tc_*.cu): PTX wrappers, the cp.async activation-tile loader
// and the split-K fix-up epilogue (the stream-K partition and the slot loads/stores are in splitk.cuh).
//
// Problem: y[M,N] = x[M,K] . W[N,K]^T. A CTA owns BM rows of x and BN columns of y; the (n-tile, k-tile) iterations
// of one m-tile are cut into gridDim.x contiguous ranges (stream-K), one per CTA, so every SM gets the same number
// of k-tiles whatever N/BN is. The pieces of a tile whose k range is split over several CTAs meet in per-CTA slots of
// a 32-bit workspace; the CTA whose contribution completes the tile (a per-tile counter of k-tiles) sums them,
// writes the output and resets the counter, so nothing needs a memset per launch (finish_tile).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "ptx.cuh"
#include "splitk.cuh"

namespace tc {
using ::lop3_and_or;
using ::mma_f16;
using splitk::acc_add;
using splitk::acc_bits;
using splitk::ld_v4;
using splitk::st_v4;
using splitk::StreamK;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; src_bytes = 0 zero-fills (rows past M).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_s8(int* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared-memory tiles hold rows of 16-byte chunks; chunk c of row r sits at chunk (c ^ (r & 7)) so that the eight
// row addresses of one ldmatrix phase hit eight different bank groups.
__device__ __forceinline__ unsigned swz(int row, int chunk, int row_bytes) {
  return static_cast<unsigned>(row * row_bytes + ((chunk ^ (row & 7)) << 4));
}

// Copy the BM x ROW_BYTES activation tile (rows m0.., bytes kbyte0..) into swizzled shared memory; rows >= M are
// zero-filled.
template <int BM, int ROW_BYTES, int NTHREADS>
__device__ __forceinline__ void load_a_tile(unsigned dst, const unsigned char* A, int M, int m0, long long a_ld,
                                            long long kbyte0) {
  constexpr int CHUNKS = ROW_BYTES / 16, TOTAL = BM * CHUNKS;
#pragma unroll
  for (int j = 0; j < (TOTAL + NTHREADS - 1) / NTHREADS; ++j) {
    const int i = j * NTHREADS + static_cast<int>(threadIdx.x);
    if (TOTAL % NTHREADS != 0 && i >= TOTAL) break;
    const int row = i / CHUNKS, c = i % CHUNKS;
    const bool ok = m0 + row < M;
    const unsigned char* src = A + (ok ? (m0 + row) * a_ld + kbyte0 + c * 16 : 0);
    cp_async16(dst + swz(row, c, ROW_BYTES), src, ok ? 16 : 0);
  }
}

// What every epilogue needs: the output, the split-K slots (two per CTA, see finish_tile) and tile counters, the
// per-row (token) and per-column (channel) scales of the quantized kernels, and the problem size.
struct Params {
  void* out;
  void* ws;
  int* counters;
  const float* sa;
  const float* sb;
  int M;
  int N;
};

// ldmatrix.x4 of the m16 x k(32 bytes) A fragment at (row0, kstep) of a swizzled tile: regs a0..a3 as mma wants.
template <int ROW_BYTES>
__device__ __forceinline__ void ldsm_a(unsigned base, int row0, int kstep, int lane, unsigned* a) {
  const int row = row0 + (lane & 15), chunk = kstep * 2 + (lane >> 4);
  ldsm_x4(base + swz(row, chunk, ROW_BYTES), a[0], a[1], a[2], a[3]);
}

// The fragment positions of an m16n8 accumulator: c[i] sits at row (lane/4 + 8*(i/2)), col ((lane%4)*2 + i%2).
// Epilogue of n-tile nt of m-tile blockIdx.y after this CTA accumulated k-tiles [k0, k1) of it. Op::store(out, row,
// col, v0, v1, ...) writes two adjacent outputs from the 32-bit sums. Every thread of the CTA calls it (it holds
// barriers); threads with active = false (warps whose sums were already folded into another warp's) write nothing.
// A split tile is summed through slots, not atomics: each CTA holding a piece stores every thread's accumulators as
// they lie in registers (16-byte stores, word (i * threads + t) * 4 + e for thread t's value 4i + e) into its own
// slot (two per CTA: the piece of its first tile, slot 0, and of its last, slot 1), then adds its k-tile count to
// the tile's counter; the CTA that completes the count adds the other pieces' slots element-wise (the same thread
// mapping in every CTA), stores the tile and resets the counter. The slots need no zeroing between launches.
template <class Op, int MF, int NF>
__device__ __forceinline__ void finish_tile(typename Op::Acc (&acc)[MF][NF][4], const Params& p, int row_base,
                                            int col_base, int nt, int tiles_n, int k0, int k1, int ktiles,
                                            const StreamK& sk, int* flag_smem, bool active = true) {
  using Acc = typename Op::Acc;
  constexpr int PER = MF * NF * 4;
  const int lane = threadIdx.x & 31;
  auto store_all = [&]() {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + mf * 16 + (lane >> 2) + 8 * h, col = col_base + nf * 8 + (lane & 3) * 2;
          if (active && row < p.M) Op::store(p, row, col, acc[mf][nf][2 * h], acc[mf][nf][2 * h + 1]);
        }
  };
  if (k0 == 0 && k1 == ktiles) {
    store_all();
    return;
  }
  const int tid = threadIdx.x, nthreads = blockDim.x, c = blockIdx.x, tile = blockIdx.y * tiles_n + nt;
  const long long slot_words = static_cast<long long>(nthreads) * PER;
  unsigned* slots = static_cast<unsigned*>(p.ws) + static_cast<long long>(blockIdx.y) * gridDim.x * 2 * slot_words;
  auto slot_of = [&](int cta) {  // the slot of cta's piece of this tile
    return slots + (static_cast<long long>(cta) * 2 + (sk.begin(cta) / ktiles == nt ? 0 : 1)) * slot_words + tid * 4;
  };
  if (active) {
    unsigned* mine = slot_of(c);
#pragma unroll
    for (int i = 0; i < PER / 4; ++i) {
      const Acc* a = acc[i / NF][i % NF];
      st_v4(mine + i * nthreads * 4, acc_bits(a[0]), acc_bits(a[1]), acc_bits(a[2]), acc_bits(a[3]));
    }
  }
  // Release: the barrier orders every thread's slot stores before thread 0's fence, and the fence is cumulative, so
  // one fence (not one per thread) publishes them all before the counter moves.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const int prev = atomicAdd(p.counters + tile, k1 - k0);
    *flag_smem = (prev + (k1 - k0) == ktiles);
  }
  __syncthreads();
  if (*flag_smem) {
    __threadfence();
    const int first_it = nt * ktiles, c_first = sk.owner(first_it), c_last = sk.owner(first_it + ktiles - 1);
    for (int o = c_first; o <= c_last; ++o) {
      if (o == c || !active) continue;
      const unsigned* theirs = slot_of(o);
#pragma unroll
      for (int i = 0; i < PER / 4; ++i) {
        unsigned v[4];
        ld_v4(theirs + i * nthreads * 4, v);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i / NF][i % NF][e] = acc_add(acc[i / NF][i % NF][e], v[e]);
      }
    }
    store_all();
    if (threadIdx.x == 0) p.counters[tile] = 0;
  }
  __syncthreads();  // flag_smem is reused by the next tile
}

}  // namespace tc

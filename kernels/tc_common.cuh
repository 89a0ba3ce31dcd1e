// Shared device code of the tensor-core GEMM kernels (tc_*.cu): PTX wrappers, the stream-K partition, the
// cp.async activation-tile loader and the split-K fix-up epilogue.
//
// Problem: y[M,N] = x[M,K] . W[N,K]^T. A CTA owns BM rows of x and BN columns of y; the (n-tile, k-tile) iterations
// of one m-tile are cut into gridDim.x contiguous ranges (stream-K), one per CTA, so every SM gets the same number
// of k-tiles whatever N/BN is. A tile whose k range is split over several CTAs is summed in a 32-bit workspace
// with atomics; the CTA whose contribution completes the tile (a per-tile counter of k-tiles) converts it to the
// output and zeroes the workspace and counter again, so they stay zero between launches (no memset per launch).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace tc {

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

// d = (a & b) | c in one LOP3 (immLut 0xEA); the compiler emits two for the C expression in some contexts.
__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ void mma_f16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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

// This CTA's contiguous range [begin, end) of the tiles_n * ktiles iterations of its m-tile.
struct Range {
  int begin, end;
};

__device__ __forceinline__ Range streamk_range(int total) {
  const int q = total / static_cast<int>(gridDim.x), r = total % static_cast<int>(gridDim.x);
  const int c = static_cast<int>(blockIdx.x);
  const int begin = c * q + (c < r ? c : r);
  return Range{begin, begin + q + (c < r ? 1 : 0)};
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

// What every epilogue needs: the output, the split-K workspace (M x N 32-bit words) and tile counters, the
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
// Epilogue of one (m-tile, n-tile) after this CTA accumulated k-tiles [k0, k1) of it. Op::store(out, row, col, v0,
// v1, ...) writes two adjacent outputs from the 32-bit sums. Every thread of the CTA calls it (it holds barriers);
// threads with active = false (warps whose sums were already folded into another warp's) write nothing.
template <class Op, int MF, int NF>
__device__ __forceinline__ void finish_tile(const typename Op::Acc (&acc)[MF][NF][4], const Params& p,
                                            int row_base, int col_base, int tile_id, int k0, int k1, int ktiles,
                                            int* flag_smem, bool active = true) {
  using Acc = typename Op::Acc;
  const int lane = threadIdx.x & 31;
  if (k0 == 0 && k1 == ktiles) {
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + mf * 16 + (lane >> 2) + 8 * h, col = col_base + nf * 8 + (lane & 3) * 2;
          if (active && row < p.M) Op::store(p, row, col, acc[mf][nf][2 * h], acc[mf][nf][2 * h + 1]);
        }
    return;
  }
  Acc* ws = reinterpret_cast<Acc*>(p.ws);
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int nf = 0; nf < NF; ++nf)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row_base + mf * 16 + (lane >> 2) + 8 * h, col = col_base + nf * 8 + (lane & 3) * 2;
        if (active && row < p.M) {
          atomicAdd(ws + static_cast<long long>(row) * p.N + col, acc[mf][nf][2 * h]);
          atomicAdd(ws + static_cast<long long>(row) * p.N + col + 1, acc[mf][nf][2 * h + 1]);
        }
      }
  // Release: the barrier orders every thread's workspace atomics before thread 0's fence, and the fence is
  // cumulative, so one fence (not one per thread) publishes them all before the counter moves.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const int prev = atomicAdd(p.counters + tile_id, k1 - k0);
    *flag_smem = (prev + (k1 - k0) == ktiles);
  }
  __syncthreads();
  if (*flag_smem) {
    __threadfence();
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
      for (int nf = 0; nf < NF; ++nf)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + mf * 16 + (lane >> 2) + 8 * h, col = col_base + nf * 8 + (lane & 3) * 2;
          if (active && row < p.M) {
            Acc* w = ws + static_cast<long long>(row) * p.N + col;
            const Acc v0 = atomicExch(w, Acc(0)), v1 = atomicExch(w + 1, Acc(0));
            Op::store(p, row, col, v0, v1);
          }
        }
    if (threadIdx.x == 0) atomicExch(p.counters + tile_id, 0);
  }
  __syncthreads();  // flag_smem is reused by the next tile
}

}  // namespace tc

// arch: sm_90a
// Microbenchmark of the wgmma issue rate (bench/bench_wgmma_rate.py): cycles per wgmma m64nNk16 f16 with A from
// registers (RS = 1, as wg_gemm_w4a16.cu) or shared memory (RS = 0, as wg_gemm.cu), CH independent accumulator chains
// per warpgroup, groups of CH wgmmas with one group in flight (wait<1> before each group, as the GEMMs do). With RS
// the A registers alternate between two sets and change every group (as dequantized weights do), so ptxas cannot
// hoist them. Every warpgroup of the block runs the same loop; thread 0 writes its clock64 cycles, every thread its
// sums (so the work cannot be dropped). Template instances by name expression (wgmma_rate<N, RS, CH>).
#include "wg_common.cuh"
using namespace wg;

template <int N, int RS, int CH>
__global__ void __launch_bounds__(CH * N / 2 <= 64 ? 512 : 256, 1)
    wgmma_rate(float* out, long long* cyc, int iters) {
  __shared__ __align__(1024) unsigned char sm[32768];
  for (int i = threadIdx.x; i < 32768 / 4; i += blockDim.x) reinterpret_cast<unsigned*>(sm)[i] = 0x3c003c00u * (i & 1);
  __syncthreads();
  const unsigned base = smem_addr(sm);
  float acc[CH][N / 2];
#pragma unroll
  for (int c = 0; c < CH; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[c][i] = 0.f;
  unsigned a[2][4] = {{0x3c003c00u, 0x3c003c00u, 0u, 0u}, {0u, 0x3c003c00u, 0u, 0x3c003c00u}};
  const unsigned long long da = descriptor(base), db = descriptor(base + 16384);
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    wgmma_wait<1>();
    unsigned (&f)[4] = a[it & 1];
    if (RS) {
#pragma unroll
      for (int k = 0; k < 4; ++k) f[k] ^= (it & 2) ? 0x00010001u : 0u;
#pragma unroll
      for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(f[k])::"memory");
    }
#pragma unroll
    for (int c = 0; c < CH; ++c) fence_acc(acc[c]);
    wgmma_fence();
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      if constexpr (RS) MmaRA<N>::run(acc[c], f[0], f[1], f[2], f[3], db + 2 * (c & 3));
      else Mma<F16, N>::run(acc[c], da + 2 * (c & 3), db);
    }
    wgmma_commit();
  }
  wgmma_wait<0>();
#pragma unroll
  for (int c = 0; c < CH; ++c) fence_acc(acc[c]);
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CH; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) s += acc[c][i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

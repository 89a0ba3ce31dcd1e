// Shared by the mma.sync kernels (tc_common.cuh) and the wgmma kernels (wg_common.cuh): the persistent grid's
// stream-K partition, and the 16-byte slot stores and loads through which the pieces of a split tile are summed.
// No CUDA headers (wg_common.cuh includes none, so NVRTC needs no include path for the wgmma kernels).
#pragma once

namespace splitk {

// The partition of an m-tile's (n-tile, k-tile) iterations over the grid's CTAs (x): CTA c takes the contiguous range
// [begin(c), begin(c + 1)). Stream-K over `total` iterations: the first r CTAs take q + 1, the others q (q >= 1: the
// host never launches more CTAs than iterations). Given tiles x ktiles and a grid of s > 1 CTAs per tile (the wgmma
// runners' aligned grid, models.kernel_terms.persistent_grid), each tile is cut into s pieces of ktiles / s k-tiles
// (rounded down or up) instead, so that no CTA holds pieces of two tiles when s does not divide ktiles.
struct StreamK {
  int q, r, s, kt;
  __device__ explicit StreamK(int total)
      : q(total / static_cast<int>(gridDim.x)), r(total % static_cast<int>(gridDim.x)), s(0), kt(1) {}
  __device__ StreamK(int tiles, int ktiles) : StreamK(tiles * ktiles) {
    const int g = static_cast<int>(gridDim.x);
    if (g > tiles && g % tiles == 0) s = g / tiles, kt = ktiles;
  }
  __device__ int begin(int c) const { return s ? (c / s) * kt + kt * (c % s) / s : c * q + (c < r ? c : r); }
  __device__ int owner(int it) const {  // the CTA whose range holds iteration it
    if (s) return (it / kt) * s + ((it % kt) * s + s - 1) / kt;
    const int big = r * (q + 1);
    return it < big ? it / (q + 1) : r + (it - big) / q;
  }
};

// 32-bit accumulators (fp32 or int32) as slot words and back.
__device__ __forceinline__ unsigned acc_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned acc_bits(int v) { return static_cast<unsigned>(v); }
__device__ __forceinline__ float acc_add(float a, unsigned b) { return a + __uint_as_float(b); }
__device__ __forceinline__ int acc_add(int a, unsigned b) { return a + static_cast<int>(b); }

// Slot traffic bypasses L1 (.cg): another SM's CTA reads what this one wrote.
__device__ __forceinline__ void st_v4(unsigned* p, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.global.cg.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ void ld_v4(const unsigned* p, unsigned (&v)[4]) {
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "l"(p)
               : "memory");
}

}  // namespace splitk

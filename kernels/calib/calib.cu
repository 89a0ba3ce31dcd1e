// Calibration micro-kernels for `workbench calibrate`: memory streams, launch floor, FP32 FMA and mma.sync peaks.
// NVRTC through CuPy: no C++ standard headers, built-in types only.
// Every kernel writes something derived from its work to `sink`, so the compiler cannot drop the work; inputs are
// derived from `seed` (never zeros).

#include <cuda_fp16.h>

typedef unsigned long long u64;

__device__ __forceinline__ uint4 ldg_nc(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// Read-only stream: 16-byte loads, 4 in flight per thread, grid-stride over n16 vectors.
extern "C" __global__ void read_stream(const uint4* __restrict__ src, u64 n16, unsigned int* __restrict__ sink) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    unsigned int acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = ldg_nc(src + i), b = ldg_nc(src + i + stride);
        uint4 c = ldg_nc(src + i + 2 * stride), d = ldg_nc(src + i + 3 * stride);
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        uint4 a = ldg_nc(src + i);
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;  // practically never: keeps the loads alive
}

// Device-to-device copy, 16-byte loads and stores.
extern "C" __global__ void copy_stream(const uint4* __restrict__ src, uint4* __restrict__ dst, u64 n16) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (; i + stride < n16; i += 2 * stride) {
        uint4 a = ldg_nc(src + i), b = ldg_nc(src + i + stride);
        dst[i] = a;
        dst[i + stride] = b;
    }
    for (; i < n16; i += stride) dst[i] = ldg_nc(src + i);
}

// L2 bandwidth: `reps` passes over a footprint that fits in L2 (plain loads so they may hit L2; L1 is bypassed
// with .cg).
extern "C" __global__ void l2_read(const uint4* __restrict__ src, u64 n16, int reps, unsigned int* __restrict__ sink) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    unsigned int acc = 0;
    for (int r = 0; r < reps; ++r) {
        u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
        for (; i + stride < n16; i += 2 * stride) {
            uint4 a, b;
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "l"(src + i));
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(src + i + stride));
            acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
        }
        for (; i < n16; i += stride) {
            uint4 a;
            asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "l"(src + i));
            acc ^= a.x ^ a.y ^ a.z ^ a.w;
        }
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

extern "C" __global__ void empty_kernel() {}

// FP32 FMA peak: 8 independent chains per thread, `iters` x 8 FMAs (16 FLOP each x 8).
extern "C" __global__ void fma_fp32(int iters, float seed, float* __restrict__ sink) {
    float a[8];
    const float m = 0.999999f, c = 1e-7f;
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = seed + (float)(threadIdx.x + j);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            a[j] = fmaf(a[j], m, c);
            a[j] = fmaf(a[j], m, c);
        }
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) s += a[j];
    if (s == 1234.5f) sink[0] = s;
}

#define CHAINS 4

// mma.sync m16n8k16, f16 x f16 -> f32: CHAINS independent accumulators per warp, `iters` rounds.
extern "C" __global__ void mma_f16(int iters, unsigned int seed, float* __restrict__ sink) {
    unsigned int a0 = 0x3c003c00u ^ (seed + threadIdx.x), a1 = a0 ^ 0x11, a2 = a0 ^ 0x22, a3 = a0 ^ 0x33;
    unsigned int b0 = 0x3800b800u ^ (seed * 3 + threadIdx.x), b1 = b0 ^ 0x44;
    float d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};"
                : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 1234.5f) sink[0] = s;
}

extern "C" __global__ void mma_bf16(int iters, unsigned int seed, float* __restrict__ sink) {
    unsigned int a0 = 0x3f803f80u ^ (seed + threadIdx.x), a1 = a0 ^ 0x11, a2 = a0 ^ 0x22, a3 = a0 ^ 0x33;
    unsigned int b0 = 0x3f00bf00u ^ (seed * 3 + threadIdx.x), b1 = b0 ^ 0x44;
    float d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};"
                : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 1234.5f) sink[0] = s;
}

// mma.sync m16n8k32, s8 x s8 -> s32.
extern "C" __global__ void mma_s8(int iters, unsigned int seed, float* __restrict__ sink) {
    unsigned int a0 = 0x01fe03fdu ^ (seed + threadIdx.x), a1 = a0 ^ 0x11, a2 = a0 ^ 0x22, a3 = a0 ^ 0x33;
    unsigned int b0 = 0x02fd01feu ^ (seed * 3 + threadIdx.x), b1 = b0 ^ 0x44;
    int d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile(
                "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};"
                : "+r"(d[c][0]), "+r"(d[c][1]), "+r"(d[c][2]), "+r"(d[c][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    int s = 0;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 12345) sink[0] = (float)s;
}

#if defined(CALIB_FP8) && __CUDA_ARCH__ >= 890
// mma.sync m16n8k32, e4m3 x e4m3 -> f32 (sm_89+; on sm_90 the hardware emulates it with conversions + HMMA).
extern "C" __global__ void mma_e4m3(int iters, unsigned int seed, float* __restrict__ sink) {
    unsigned int a0 = 0x38b838b8u ^ ((seed + threadIdx.x) & 0x07070707u), a1 = a0 ^ 0x01, a2 = a0 ^ 0x02, a3 = a0 ^ 0x03;
    unsigned int b0 = 0x30b030b0u ^ ((seed * 3 + threadIdx.x) & 0x07070707u), b1 = b0 ^ 0x04;
    float d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile(
                "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%0,%1,%2,%3};"
                : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 1234.5f) sink[0] = s;
}
#endif

// ---- CUDA-core conversion work per weight (the kernel-aware model's ALU term) ----------------------------------
// Each thread turns `iters` x 8 fresh 32-bit words into fp16 weights and multiplies them into half2 accumulators, as
// a W4A16 / W8A16 GEMV does at batch 1: the issue rate of that instruction mix, with no memory traffic.

__device__ __forceinline__ unsigned int and_or(unsigned int a, unsigned int mask, unsigned int bits) {
    unsigned int r;  // (a & mask) | bits in one LOP3
    asm volatile("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(a), "r"(mask), "r"(bits));
    return r;
}

__device__ __forceinline__ half2 as_h2(unsigned int v) { return *reinterpret_cast<half2*>(&v); }

// int4 -> fp16 with the 0x6400 magic (Marlin / FasterTransformer style): per word of 8 codes 1 IADD (fresh word),
// 1 SHR, 4 LOP3, 2 HSUB2 + 2 HFMA2 (bias / the x16 nibbles), 4 HMUL2 by a group scale, 4 HFMA2 with x.
extern "C" __global__ void dq_w4(int iters, unsigned int seed, float* __restrict__ sink) {
    const half2 bias = __float2half2_rn(1032.f), k16 = __float2half2_rn(0.0625f), b16 = __float2half2_rn(-72.f);
    const half2 s = __float2half2_rn(0.0078125f), x = __floats2half2_rn(0.5f, -0.25f);
    half2 acc0 = __float2half2_rn(0.f), acc1 = acc0;
    const unsigned int q = seed ^ (threadIdx.x * 2654435761u);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned int w = q + (unsigned int)(i * 8 + j), sh = w >> 8;
            const half2 a = __hsub2(as_h2(and_or(w, 0x000f000fu, 0x64006400u)), bias);
            const half2 b = __hfma2(as_h2(and_or(w, 0x00f000f0u, 0x64006400u)), k16, b16);
            const half2 c = __hsub2(as_h2(and_or(sh, 0x000f000fu, 0x64006400u)), bias);
            const half2 d = __hfma2(as_h2(and_or(sh, 0x00f000f0u, 0x64006400u)), k16, b16);
            acc0 = __hfma2(__hmul2(a, s), x, acc0);
            acc1 = __hfma2(__hmul2(b, s), x, acc1);
            acc0 = __hfma2(__hmul2(c, s), x, acc0);
            acc1 = __hfma2(__hmul2(d, s), x, acc1);
        }
    }
    const float r = __low2float(acc0) + __high2float(acc1);
    if (r == 1234.5f) sink[0] = r;
}

// int8 -> fp16 with PRMT into the 0x6400 magic: per word of 4 codes 1 IADD, 2 PRMT, 2 HSUB2, 2 HFMA2 with x (the row
// scale is applied once per output, not per weight).
extern "C" __global__ void dq_w8(int iters, unsigned int seed, float* __restrict__ sink) {
    const half2 bias = __float2half2_rn(1152.f), x = __floats2half2_rn(0.5f, -0.25f);
    half2 acc0 = __float2half2_rn(0.f), acc1 = acc0;
    const unsigned int q = seed ^ (threadIdx.x * 2654435761u);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned int w = (q + (unsigned int)(i * 8 + j)) ^ 0x80808080u;  // offset-binary int8
            unsigned int lo, hi;
            asm volatile("prmt.b32 %0, %1, %2, 0x7170;" : "=r"(lo) : "r"(w), "r"(0x64646464u));
            asm volatile("prmt.b32 %0, %1, %2, 0x7372;" : "=r"(hi) : "r"(w), "r"(0x64646464u));
            acc0 = __hfma2(__hsub2(as_h2(lo), bias), x, acc0);
            acc1 = __hfma2(__hsub2(as_h2(hi), bias), x, acc1);
        }
    }
    const float r = __low2float(acc0) + __high2float(acc1);
    if (r == 1234.5f) sink[0] = r;
}

#if defined(CALIB_FP8) && __CUDA_ARCH__ >= 890
// e4m3 -> fp16 by the hardware conversion: per word of 4 codes 1 IADD, 2 cvt.rn.f16x2.e4m3x2, 2 HFMA2 with x.
extern "C" __global__ void dq_e4m3(int iters, unsigned int seed, float* __restrict__ sink) {
    const half2 x = __floats2half2_rn(0.5f, -0.25f);
    half2 acc0 = __float2half2_rn(0.f), acc1 = acc0;
    const unsigned int q = seed ^ (threadIdx.x * 2654435761u);
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const unsigned int w = (q + (unsigned int)(i * 8 + j)) & 0x3f3f3f3fu;  // finite codes only
            unsigned int lo, hi;
            asm volatile("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.rn.f16x2.e4m3x2 %0, l; cvt.rn.f16x2.e4m3x2 %1, h;}"
                         : "=r"(lo), "=r"(hi) : "r"(w));
            acc0 = __hfma2(as_h2(lo), x, acc0);
            acc1 = __hfma2(as_h2(hi), x, acc1);
        }
    }
    const float r = __low2float(acc0) + __high2float(acc1);
    if (r == 1234.5f) sink[0] = r;
}
#endif

// 16-bit (fp16, bf16) and fp32 weight GEMV for a batch of M <= GEMV_MB activation rows, fp32 accumulation.
// Skeleton and launch geometry: gemv_common.cuh. W row-major N x K, x M x K, y M x N (same dtype as x).
#include "gemv_common.cuh"

__device__ __forceinline__ void u4_f16_to_f32(const uint4& v, float* o) {
    float2 a = h2_to_f2(v.x), b = h2_to_f2(v.y), c = h2_to_f2(v.z), d = h2_to_f2(v.w);
    o[0] = a.x; o[1] = a.y; o[2] = b.x; o[3] = b.y; o[4] = c.x; o[5] = c.y; o[6] = d.x; o[7] = d.y;
}

__device__ __forceinline__ void u4_bf16_to_f32(const uint4& v, float* o) {
    float2 a = bf2_to_f2(v.x), b = bf2_to_f2(v.y), c = bf2_to_f2(v.z), d = bf2_to_f2(v.w);
    o[0] = a.x; o[1] = a.y; o[2] = b.x; o[3] = b.y; o[4] = c.x; o[5] = c.y; o[6] = d.x; o[7] = d.y;
}

struct PolicyF16 {
    typedef float Acc;
    typedef F8 XRow;
    typedef F8 Dec;
    const uint4* W; const __half* x; __half* y; int N, K, rowchunks;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        u4_f16_to_f32(__ldg(reinterpret_cast<const uint4*>(x + (size_t)m * K) + c), f.v);
    }
    __device__ void decode(Dec& d, const uint4& w, int, int) const { u4_f16_to_f32(w, d.v); }
    __device__ void fma(float& a, const Dec& d, const XRow& f) const { fma8(a, d.v, f.v); }
    __device__ void store(int row, int m, float s) const { y[(size_t)m * N + row] = __float2half_rn(s); }
};

struct PolicyBF16 {
    typedef float Acc;
    typedef F8 XRow;
    typedef F8 Dec;
    const uint4* W; const __nv_bfloat16* x; __nv_bfloat16* y; int N, K, rowchunks;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        u4_bf16_to_f32(__ldg(reinterpret_cast<const uint4*>(x + (size_t)m * K) + c), f.v);
    }
    __device__ void decode(Dec& d, const uint4& w, int, int) const { u4_bf16_to_f32(w, d.v); }
    __device__ void fma(float& a, const Dec& d, const XRow& f) const { fma8(a, d.v, f.v); }
    __device__ void store(int row, int m, float s) const { y[(size_t)m * N + row] = __float2bfloat16_rn(s); }
};

struct F4 { float v[4]; };

struct PolicyF32 {
    typedef float Acc;
    typedef F4 XRow;
    typedef F4 Dec;
    const uint4* W; const float* x; float* y; int N, K, rowchunks;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        const float4 v = __ldg(reinterpret_cast<const float4*>(x + (size_t)m * K) + c);
        f.v[0] = v.x; f.v[1] = v.y; f.v[2] = v.z; f.v[3] = v.w;
    }
    __device__ void decode(Dec& d, const uint4& w, int, int) const {
        d.v[0] = __uint_as_float(w.x); d.v[1] = __uint_as_float(w.y);
        d.v[2] = __uint_as_float(w.z); d.v[3] = __uint_as_float(w.w);
    }
    __device__ void fma(float& a, const Dec& d, const XRow& f) const {
#pragma unroll
        for (int j = 0; j < 4; ++j) a = fmaf(d.v[j], f.v[j], a);
    }
    __device__ void store(int row, int m, float s) const { y[(size_t)m * N + row] = s; }
};

extern "C" __global__ void gemv_f16(const uint4* W, const __half* x, __half* y, int M, int N, int K) {
    PolicyF16 p{W, x, y, N, K, K / 8};
    gemv_run(p, M, N, K / 8);
}

extern "C" __global__ void gemv_bf16(const uint4* W, const __nv_bfloat16* x, __nv_bfloat16* y, int M, int N, int K) {
    PolicyBF16 p{W, x, y, N, K, K / 8};
    gemv_run(p, M, N, K / 8);
}

extern "C" __global__ void gemv_f32(const uint4* W, const float* x, float* y, int M, int N, int K) {
    PolicyF32 p{W, x, y, N, K, K / 4};
    gemv_run(p, M, N, K / 4);
}

// FP8 (e4m3) weight-only GEMV: e4m3 pairs -> half2 with the hardware conversion (cvt.rn.f16x2.e4m3x2 on sm_89+),
// fp16 activations, fp32 accumulation, the per-tensor or per-channel fp32 scale applied once per output.
// (Tensor-core e4m3 mma.sync is emulated on sm_90; this CUDA-core kernel does not use it.)
#include "gemv_common.cuh"
#include <cuda_fp8.h>

__device__ __forceinline__ void e4m3x4_to_f32(unsigned w, float* out) {
    __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
    __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
    float2 a = __half22float2(*reinterpret_cast<__half2*>(&lo));
    float2 b = __half22float2(*reinterpret_cast<__half2*>(&hi));
    out[0] = a.x; out[1] = a.y; out[2] = b.x; out[3] = b.y;
}

struct PolicyFP8 {
    typedef float Acc;
    typedef F16x XRow;
    typedef F16x Dec;
    const uint4* W; const float* scales; const __half* x; __half* y; int N, K, rowchunks, per_channel;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        const __half* src = x + (size_t)m * K + c * 16;
        load8_f16(f.v, src);
        load8_f16(f.v + 8, src + 8);
    }
    __device__ void decode(Dec& d, const uint4& w, int, int) const {
        e4m3x4_to_f32(w.x, d.v); e4m3x4_to_f32(w.y, d.v + 4); e4m3x4_to_f32(w.z, d.v + 8); e4m3x4_to_f32(w.w, d.v + 12);
    }
    __device__ void fma(float& a, const Dec& d, const XRow& f) const {
        fma8(a, d.v, f.v);
        fma8(a, d.v + 8, f.v + 8);
    }
    __device__ void store(int row, int m, float s) const {
        y[(size_t)m * N + row] = __float2half_rn(s * scales[per_channel ? row : 0]);
    }
};

extern "C" __global__ void gemv_fp8(const uint4* W, const float* scales, const __half* x, __half* y,
                                    int M, int N, int K, int per_channel) {
    PolicyFP8 p{W, scales, x, y, N, K, K / 16, per_channel};
    gemv_run(p, M, N, K / 16);
}

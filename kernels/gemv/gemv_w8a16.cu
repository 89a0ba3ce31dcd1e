// W8A16 GEMV (the chapter's exercise 1): int8 weights, one fp16 scale per row applied once at the end, fp16
// activations, fp32 accumulation. 16 int8 weights per 16-byte load; int8 -> fp32 exactly by the magic-number trick:
// the byte b ^ 0x80 (= b + 128) is placed in the mantissa of 2^23 with prmt, then 2^23 + 128 is subtracted.
#include "gemv_common.cuh"

__device__ __forceinline__ void s8x4_to_f32(unsigned w, float* out) {
    const unsigned u = w ^ 0x80808080u;
    out[0] = __uint_as_float(prmt(u, 0x4B000000u, 0x7540)) - 8388736.f;
    out[1] = __uint_as_float(prmt(u, 0x4B000000u, 0x7541)) - 8388736.f;
    out[2] = __uint_as_float(prmt(u, 0x4B000000u, 0x7542)) - 8388736.f;
    out[3] = __uint_as_float(prmt(u, 0x4B000000u, 0x7543)) - 8388736.f;
}

struct PolicyW8A16 {
    typedef float Acc;
    typedef F16x XRow;
    typedef F16x Dec;
    const uint4* W; const __half* scales; const __half* x; __half* y; int N, K, rowchunks;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        const __half* src = x + (size_t)m * K + c * 16;
        load8_f16(f.v, src);
        load8_f16(f.v + 8, src + 8);
    }
    __device__ void decode(Dec& d, const uint4& w, int, int) const {
        s8x4_to_f32(w.x, d.v); s8x4_to_f32(w.y, d.v + 4); s8x4_to_f32(w.z, d.v + 8); s8x4_to_f32(w.w, d.v + 12);
    }
    __device__ void fma(float& a, const Dec& d, const XRow& f) const {
        fma8(a, d.v, f.v);
        fma8(a, d.v + 8, f.v + 8);
    }
    __device__ void store(int row, int m, float s) const {
        y[(size_t)m * N + row] = __float2half_rn(s * __half2float(scales[row]));
    }
};

extern "C" __global__ void gemv_w8a16(const uint4* W, const __half* scales, const __half* x, __half* y,
                                      int M, int N, int K) {
    PolicyW8A16 p{W, scales, x, y, N, K, K / 16};
    gemv_run(p, M, N, K / 16);
}

// W8A8 GEMV: int8 weights (fp16 scale per row), int8 activations (fp32 scale per token), dp4a into int32,
// rescaled once per output: y[m, n] = acc * sw[n] * sx[m], written as fp16.
#include "gemv_common.cuh"

struct I4 { int v[4]; };

struct PolicyW8A8 {
    typedef int Acc;
    typedef I4 XRow;
    typedef I4 Dec;
    const uint4* W; const __half* sw; const signed char* x; const float* sx; __half* y; int N, K, rowchunks;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        const int4 v = __ldg(reinterpret_cast<const int4*>(x + (size_t)m * K) + c);
        f.v[0] = v.x; f.v[1] = v.y; f.v[2] = v.z; f.v[3] = v.w;
    }
    __device__ void decode(Dec& d, const uint4& w, int, int) const {
        d.v[0] = (int)w.x; d.v[1] = (int)w.y; d.v[2] = (int)w.z; d.v[3] = (int)w.w;
    }
    __device__ void fma(int& a, const Dec& d, const XRow& f) const {
        a = __dp4a(d.v[0], f.v[0], a);
        a = __dp4a(d.v[1], f.v[1], a);
        a = __dp4a(d.v[2], f.v[2], a);
        a = __dp4a(d.v[3], f.v[3], a);
    }
    __device__ void store(int row, int m, int s) const {
        y[(size_t)m * N + row] = __float2half_rn((float)s * __half2float(sw[row]) * sx[m]);
    }
};

extern "C" __global__ void gemv_w8a8(const uint4* W, const __half* sw, const signed char* x, const float* sx,
                                     __half* y, int M, int N, int K) {
    PolicyW8A8 p{W, sw, x, sx, y, N, K, K / 16};
    gemv_run(p, M, N, K / 16);
}

// Making a problem on the device (kernels/problems.py): counter-based random inputs, the quantizers of
// kernels/quant/quant.py computed the same way (float64 arithmetic, round-to-nearest-even: bit for bit the host's
// results, tests/test_problems_gpu.py), conversions to the kernels' input types, and float64 dequantization for the
// reference. One module, compiled once; nothing here is timed.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned long long u64;

__device__ __forceinline__ u64 mix64(u64 z) {  // splitmix64's finalizer
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define GRID_STRIDE(i, n) for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
                               i += (long long)gridDim.x * blockDim.x)

// Standard normal values (Box-Muller on a 64-bit hash of (seed, index)) times `scale`: never all zeros.
extern "C" __global__ void fill_normal(float* out, long long n, u64 seed, float scale) {
    u64 base = mix64(seed * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
    GRID_STRIDE(i, n) {
        u64 h = mix64(base ^ (u64)i);
        float u1 = ((unsigned)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
        float u2 = ((unsigned)(h & 0xFFFFFFu)) * (1.0f / 16777216.0f);
        out[i] = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}

// ---------------------------------------------------------------- conversions (quant.to_bf16_bits' rounding)
extern "C" __global__ void f32_to_f16(const float* x, __half* out, long long n) {
    GRID_STRIDE(i, n) out[i] = __float2half_rn(x[i]);
}

extern "C" __global__ void f32_to_bf16_bits(const float* x, unsigned short* out, long long n) {
    GRID_STRIDE(i, n) {
        unsigned b = __float_as_uint(x[i]);
        out[i] = isnan(x[i]) ? (unsigned short)((b >> 16) | 0x40u) : (unsigned short)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
    }
}

extern "C" __global__ void f32_to_f64(const float* x, double* out, long long n) {
    GRID_STRIDE(i, n) out[i] = (double)x[i];
}

extern "C" __global__ void f16_to_f64(const __half* x, double* out, long long n) {
    GRID_STRIDE(i, n) out[i] = (double)__half2float(x[i]);
}

extern "C" __global__ void bf16_bits_to_f64(const unsigned short* x, double* out, long long n) {
    GRID_STRIDE(i, n) out[i] = (double)__uint_as_float(((unsigned)x[i]) << 16);
}

// ---------------------------------------------------------------- W4: asymmetric int4 per group of G along K
// quant.quantize_w4: lo = min(group, 0), hi = max(group, 0), scale = fp16(span / 15) (1 when span == 0),
// zero = clip(rint(-lo / s), 0, 15), code = clip(rint(w / s) + zero, 0, 15); one thread per (row, group).
extern "C" __global__ void quantize_w4(const float* w, int N, int K, int G, unsigned char* codes, __half* scales,
                                       unsigned char* zeros) {
    const int groups = K / G;
    GRID_STRIDE(idx, (long long)N * groups) {
        const float* p = w + (idx / groups) * (long long)K + (idx % groups) * (long long)G;
        double lo = 0.0, hi = 0.0;
        for (int j = 0; j < G; ++j) {
            double v = (double)p[j];
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
        double span = hi - lo;
        __half sh = __double2half(span > 0.0 ? span / 15.0 : 1.0);
        double s = (double)__half2float(sh);
        double z = fmin(fmax(rint(-lo / s), 0.0), 15.0);
        scales[idx] = sh;
        zeros[idx] = (unsigned char)z;
        unsigned char* c = codes + (p - w);
        for (int j = 0; j < G; ++j) c[j] = (unsigned char)fmin(fmax(rint((double)p[j] / s) + z, 0.0), 15.0);
    }
}

extern "C" __global__ void dequantize_w4(const unsigned char* codes, const __half* scales, const unsigned char* zeros,
                                         int N, int K, int G, double* out) {
    GRID_STRIDE(i, (long long)N * K) {
        long long g = (i / K) * (K / G) + (i % K) / G;
        out[i] = ((double)codes[i] - (double)zeros[g]) * (double)__half2float(scales[g]);
    }
}

// ---------------------------------------------------------------- per-row absolute maximum (a warp per row)
__device__ __forceinline__ double row_absmax(const float* row, int K) {
    double a = 0.0;
    for (int k = threadIdx.x & 31; k < K; k += 32) a = fmax(a, fabs((double)row[k]));
    for (int o = 16; o; o >>= 1) a = fmax(a, __shfl_xor_sync(0xffffffffu, a, o));
    return a;
}

#define WARP_PER_ROW(r, rows) for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; \
                                   r < (rows); r += ((long long)gridDim.x * blockDim.x) >> 5)

// W8 (quant.quantize_w8): symmetric int8 per row, fp16 scale = fp16(amax / 127) (1 when amax == 0).
// Int8 activations (quant.quantize_act_int8): the same per token with an fp32 scale (f32_scale = 1).
extern "C" __global__ void quantize_int8_rows(const float* w, int rows, int K, int f32_scale, signed char* codes,
                                              void* scales) {
    WARP_PER_ROW(r, rows) {
        const float* row = w + r * (long long)K;
        double amax = row_absmax(row, K);
        double s;
        if (f32_scale) {
            float sf = __double2float_rn(amax > 0.0 ? amax / 127.0 : 1.0);
            s = (double)sf;
            if ((threadIdx.x & 31) == 0) ((float*)scales)[r] = sf;
        } else {
            __half sh = __double2half(amax > 0.0 ? amax / 127.0 : 1.0);
            s = (double)__half2float(sh);
            if ((threadIdx.x & 31) == 0) ((__half*)scales)[r] = sh;
        }
        for (int k = threadIdx.x & 31; k < K; k += 32)
            codes[r * (long long)K + k] = (signed char)fmin(fmax(rint((double)row[k] / s), -127.0), 127.0);
    }
}

// int8 codes times a per-row scale (fp16 for W8, fp32 for activations), in float64.
extern "C" __global__ void dequantize_int8_rows(const signed char* codes, const void* scales, int f32_scale, int rows,
                                                int K, double* out) {
    GRID_STRIDE(i, (long long)rows * K) {
        long long r = i / K;
        double s = f32_scale ? (double)((const float*)scales)[r] : (double)__half2float(((const __half*)scales)[r]);
        out[i] = (double)codes[i] * s;
    }
}

// ---------------------------------------------------------------- FP8 e4m3fn (quant.encode_e4m3 / decode_e4m3)
__device__ __forceinline__ double e4m3_value(int code) {  // codes 0..126: the positive values, increasing
    int e = (code >> 3) & 0xF, m = code & 7;
    return e == 0 ? (m / 8.0) * 0.015625 : ldexp(1.0 + m / 8.0, e - 7);
}

// Nearest code, ties to the even code, saturating at 448; the sign bit set for negative values and -0.
__device__ __forceinline__ unsigned char e4m3_encode(double v) {
    double a = fmin(fabs(v), 448.0);
    int lo_i = 0, hi_i = 127;  // first code in [0, 127) whose value is >= a (searchsorted left), clipped to 126
    while (lo_i < hi_i) {
        int mid = (lo_i + hi_i) >> 1;
        if (e4m3_value(mid) < a) lo_i = mid + 1; else hi_i = mid;
    }
    int hi = min(lo_i, 126), lo = max(hi - 1, 0);
    double d_lo = a - e4m3_value(lo), d_hi = e4m3_value(hi) - a;
    int code = (d_hi < d_lo || (d_hi == d_lo && hi % 2 == 0)) ? hi : lo;
    return (unsigned char)(signbit(v) ? (code | 0x80) : code);
}

// quant.quantize_fp8: per row (per_row = 1: per channel / per token) or one scale for all rows (amax given: the
// largest row maximum, from fp8_row_absmax); scale = fp32(amax / 448) (1 when amax == 0).
extern "C" __global__ void fp8_row_absmax(const float* w, int rows, int K, float* out) {
    WARP_PER_ROW(r, rows) {
        double a = row_absmax(w + r * (long long)K, K);
        if ((threadIdx.x & 31) == 0) out[r] = (float)a;  // a float32 value: exact
    }
}

extern "C" __global__ void quantize_fp8_rows(const float* w, int rows, int K, int per_row, float amax_all,
                                             unsigned char* codes, float* scales) {
    WARP_PER_ROW(r, rows) {
        const float* row = w + r * (long long)K;
        double amax = per_row ? row_absmax(row, K) : (double)amax_all;
        float sf = __double2float_rn(amax > 0.0 ? amax / 448.0 : 1.0);
        double s = (double)sf;
        if ((threadIdx.x & 31) == 0 && (per_row || r == 0)) scales[r] = sf;
        for (int k = threadIdx.x & 31; k < K; k += 32) codes[r * (long long)K + k] = e4m3_encode((double)row[k] / s);
    }
}

// quant.quantize_fp8(..., "block"): one scale per br x bc block of a rows x K array (the last blocks partial),
// scale = fp32(amax / 448) (1 when amax == 0), codes = e4m3(w / scale); one CUDA block of 256 threads per scale block
// (the block scales of DeepSeek-V3: 128 x 128 for weights, 1 x 128 for activations).
extern "C" __global__ void quantize_fp8_blocks(const float* w, int rows, int K, int br, int bc, unsigned char* codes,
                                               float* scales) {
    __shared__ double part[256];
    const int nbc = (K + bc - 1) / bc, nb = ((rows + br - 1) / br) * nbc;
    for (int b = blockIdx.x; b < nb; b += gridDim.x) {
        const int r0 = (b / nbc) * br, c0 = (b % nbc) * bc;
        const int nr = min(br, rows - r0), nc = min(bc, K - c0);
        double a = 0.0;
        for (int i = threadIdx.x; i < nr * nc; i += blockDim.x)
            a = fmax(a, fabs((double)w[(long long)(r0 + i / nc) * K + c0 + i % nc]));
        part[threadIdx.x] = a;
        __syncthreads();
        for (int h = blockDim.x / 2; h > 0; h >>= 1) {
            if (threadIdx.x < h) part[threadIdx.x] = fmax(part[threadIdx.x], part[threadIdx.x + h]);
            __syncthreads();
        }
        const double amax = part[0];
        __syncthreads();  // every thread has read part[0] before the next block's maxima overwrite it
        const float sf = __double2float_rn(amax > 0.0 ? amax / 448.0 : 1.0);
        const double s = (double)sf;
        if (threadIdx.x == 0) scales[b] = sf;
        for (int i = threadIdx.x; i < nr * nc; i += blockDim.x) {
            const long long at = (long long)(r0 + i / nc) * K + c0 + i % nc;
            codes[at] = e4m3_encode((double)w[at] / s);
        }
    }
}

extern "C" __global__ void dequantize_fp8_blocks(const unsigned char* codes, const float* scales, int rows, int K,
                                                 int br, int bc, double* out) {
    const int nbc = (K + bc - 1) / bc;
    GRID_STRIDE(i, (long long)rows * K) {
        const int r = (int)(i / K), k = (int)(i % K);
        int c = codes[i];
        double v = (c & 0x7F) == 0x7F ? nan("") : e4m3_value(c & 0x7F);
        out[i] = (c & 0x80 ? -v : v) * (double)scales[(r / br) * nbc + k / bc];
    }
}

extern "C" __global__ void dequantize_fp8_rows(const unsigned char* codes, const float* scales, int per_row,
                                               int rows, int K, double* out) {
    GRID_STRIDE(i, (long long)rows * K) {
        int c = codes[i];
        double v = (c & 0x7F) == 0x7F ? nan("") : e4m3_value(c & 0x7F);
        out[i] = (c & 0x80 ? -v : v) * (double)scales[per_row ? i / K : 0];
    }
}

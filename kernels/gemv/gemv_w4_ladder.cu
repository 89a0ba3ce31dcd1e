// The W4A16 production-tricks ladder (kernels/gemv/ladder.py holds the order and the trick of each rung). Rung 0 is the
// chapter's gemv_w4 (kernels/gemv/gemv_reference.cu); each kernel here adds ONE trick to the rung before and keeps the
// rest of the chapter's kernel: one warp per output row, 4 warps per block, x staged in shared memory in K-tiles of
// KT columns (KT = K at M = 1 when it fits in 48 KB: kernels/gemv/gemv.py `x_tile`), the group size W4_GROUP a compile-time
// constant, a warp-shuffle reduction, fp32 accumulation across chunks. Batch: rows m < M <= GEMV_MB of x.
//
// rung 1  ladder_w4_vec16    16-byte vector loads: a lane reads one uint4 of packed weights (32 weights, one group:
//                            W4_GROUP % 32 == 0) per step instead of one 32-bit word, and x is staged and read 16 bytes
//                            at a time. Staged rows carry 4 floats of padding after every 32 so that the 16-byte
//                            shared reads of the 32 lanes (each 32 weights apart) hit distinct banks. Dequant as the
//                            chapter: shift, mask, int->float convert, subtract z, multiply s, fp32 FMA.
// rung 2  ladder_w4_magic    fast INT4->FP16: (w >> 4p) & 0x000F000F | 0x64006400 (one lop3) is the half2
//                            (1024 + q_p, 1024 + q_{p+4}) exactly; one hsub2 with (1024 + z) gives q - z; fp16
//                            activations (staged with 8 halves of padding per 32), half2 FMAs (8 products per half
//                            per chunk, then fp32, scale applied once per chunk). The chapter's packing pairs weights
//                            (p, p + 4), so each x pair is built by one prmt from the staged in-order halves.
// rung 3  ladder_w4_reorder  offline weight reorder (kernels/quant/pack_w4.py): nibbles stored so that (w >> 4i) pairs
//                            weights (2i, 2i + 1), in order, so the staged x half2 is used as it is (no prmt); scale
//                            and (1024 + z) in one 32-bit word per group (one load instead of two).
#include "gemv_common.cuh"

#ifndef W4_GROUP
#define W4_GROUP 128
#endif

// Rows m < M of x[:, k0 : k0 + kt] into shared memory, 16 bytes per load, PAD elements after every 32 (kt % 32 == 0,
// row stride ldx elements).
template <typename T, int PAD>
__device__ __forceinline__ void stage_x16(T* xs, const T* x, int M, int K, int k0, int kt, int ldx) {
    constexpr int E = 16 / sizeof(T);
    const int pieces = kt / E;
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        if (GEMV_MB > 1 && m >= M) break;
        const uint4* src = reinterpret_cast<const uint4*>(x + (size_t)m * K + k0);
        for (int i = threadIdx.x; i < pieces; i += blockDim.x) {
            const int k = i * E;
            *reinterpret_cast<uint4*>(xs + m * ldx + k + (k >> 5) * PAD) = src[i];
        }
    }
}

// Warp sums of acc; lane 0 of an active warp writes y[m, row] for m < M.
template <typename OutT>
__device__ __forceinline__ void ladder_store(OutT* y, const float (&acc)[GEMV_MB], bool active, int row, int M, int N) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        const float s = warp_sum(acc[m]);
        if (active && lane == 0 && (GEMV_MB == 1 || m < M)) y[(size_t)m * N + row] = OutT(s);
    }
}

__device__ __forceinline__ __half2 as_h2(unsigned u) { return *reinterpret_cast<__half2*>(&u); }

// Rung 1. Wq: the chapter's packing as uint4 [N, K/32]; scales, zeros fp32 [N, K/W4_GROUP]; x fp32 [M, K]; y fp32.
// Dynamic shared memory: GEMV_MB * (KT + KT/32 * 4) floats.
extern "C" __global__ void ladder_w4_vec16(const uint4* Wq, const float* scales, const float* zeros, const float* x,
                                           float* y, int M, int N, int K, int KT) {
    extern __shared__ uint4 smem_v[];
    float* xs = reinterpret_cast<float*>(smem_v);
    const int ldx = KT + (KT >> 5) * 4;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const bool active = row < N;
    const int chunks = K >> 5, groups = K / W4_GROUP;
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KT) {
        const int kt = min(KT, K - k0);
        if (k0) __syncthreads();
        stage_x16<float, 4>(xs, x, M, K, k0, kt, ldx);
        __syncthreads();
        if (!active) continue;
        const uint4* wrow = Wq + (size_t)row * chunks + (k0 >> 5);
        for (int c = lane; c < (kt >> 5); c += 32) {
            const uint4 w = wrow[c];
            const int g = (k0 + (c << 5)) / W4_GROUP;
            const float s = scales[(size_t)row * groups + g];
            const float z = zeros[(size_t)row * groups + g];
            const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float wf[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) wf[j] = ((float)((words[q] >> (4 * j)) & 0xFu) - z) * s;
#pragma unroll
                for (int m = 0; m < GEMV_MB; ++m) {
                    if (GEMV_MB > 1 && m >= M) break;
                    const float4* xp = reinterpret_cast<const float4*>(xs + m * ldx + c * 36 + q * 8);
                    const float4 a = xp[0], b = xp[1];
                    const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[m] = fmaf(wf[j], xv[j], acc[m]);
                }
            }
        }
    }
    ladder_store(y, acc, active, row, M, N);
}

// Rung 2. Wq: the chapter's packing as uint4 [N, K/32]; scales, zeros fp32 [N, K/W4_GROUP]; x fp16 [M, K]; y fp16.
// Dynamic shared memory: GEMV_MB * (KT + KT/32 * 8) halves.
extern "C" __global__ void ladder_w4_magic(const uint4* Wq, const float* scales, const float* zeros, const __half* x,
                                           __half* y, int M, int N, int K, int KT) {
    extern __shared__ uint4 smem_m[];
    __half* xs = reinterpret_cast<__half*>(smem_m);
    const int ldx = KT + (KT >> 5) * 8;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const bool active = row < N;
    const int chunks = K >> 5, groups = K / W4_GROUP;
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KT) {
        const int kt = min(KT, K - k0);
        if (k0) __syncthreads();
        stage_x16<__half, 8>(xs, x, M, K, k0, kt, ldx);
        __syncthreads();
        if (!active) continue;
        const uint4* wrow = Wq + (size_t)row * chunks + (k0 >> 5);
        for (int c = lane; c < (kt >> 5); c += 32) {
            const uint4 w = wrow[c];
            const int g = (k0 + (c << 5)) / W4_GROUP;
            const float s = scales[(size_t)row * groups + g];
            const __half2 zh = __float2half2_rn(1024.f + zeros[(size_t)row * groups + g]);  // exact: z in 0..15
            const unsigned words[4] = {w.x, w.y, w.z, w.w};
            __half2 a0[GEMV_MB], a1[GEMV_MB];
#pragma unroll
            for (int m = 0; m < GEMV_MB; ++m) a0[m] = a1[m] = __float2half2_rn(0.f);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                __half2 d[4];  // d[p] = (q_p - z, q_{p+4} - z) of this word's 8 weights
#pragma unroll
                for (int p = 0; p < 4; ++p)
                    d[p] = __hsub2(as_h2(lop3_and_or(words[q] >> (4 * p), 0x000F000Fu, 0x64006400u)), zh);
#pragma unroll
                for (int m = 0; m < GEMV_MB; ++m) {
                    if (GEMV_MB > 1 && m >= M) break;
                    const uint4 xv = *reinterpret_cast<const uint4*>(xs + m * ldx + c * 40 + q * 8);
                    // x halves k..k+7 of this word in order; pair p is (x_p, x_{p+4})
                    a0[m] = __hfma2(d[0], as_h2(__byte_perm(xv.x, xv.z, 0x5410)), a0[m]);
                    a1[m] = __hfma2(d[1], as_h2(__byte_perm(xv.x, xv.z, 0x7632)), a1[m]);
                    a0[m] = __hfma2(d[2], as_h2(__byte_perm(xv.y, xv.w, 0x5410)), a0[m]);
                    a1[m] = __hfma2(d[3], as_h2(__byte_perm(xv.y, xv.w, 0x7632)), a1[m]);
                }
            }
#pragma unroll
            for (int m = 0; m < GEMV_MB; ++m) {
                if (GEMV_MB > 1 && m >= M) break;
                const float2 s0 = __half22float2(a0[m]), s1 = __half22float2(a1[m]);
                acc[m] = fmaf(s, (s0.x + s0.y) + (s1.x + s1.y), acc[m]);
            }
        }
    }
    ladder_store(y, acc, active, row, M, N);
}

// Rung 3. Wq: kernels/quant/pack_w4.py's reordered nibbles as uint4 [N, K/32]; SZ uint32 [N, K/W4_GROUP] (low half fp16
// scale, high half fp16 1024 + z); x fp16 [M, K]; y fp16. Dynamic shared memory: GEMV_MB * (KT + KT/32 * 8) halves.
extern "C" __global__ void ladder_w4_reorder(const uint4* Wq, const unsigned* SZ, const __half* x, __half* y, int M,
                                             int N, int K, int KT) {
    extern __shared__ uint4 smem_r[];
    __half* xs = reinterpret_cast<__half*>(smem_r);
    const int ldx = KT + (KT >> 5) * 8;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const bool active = row < N;
    const int chunks = K >> 5, groups = K / W4_GROUP;
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KT) {
        const int kt = min(KT, K - k0);
        if (k0) __syncthreads();
        stage_x16<__half, 8>(xs, x, M, K, k0, kt, ldx);
        __syncthreads();
        if (!active) continue;
        const uint4* wrow = Wq + (size_t)row * chunks + (k0 >> 5);
        for (int c = lane; c < (kt >> 5); c += 32) {
            const uint4 w = wrow[c];
            const unsigned sz = SZ[(size_t)row * groups + (k0 + (c << 5)) / W4_GROUP];
            const __half2 zh = as_h2(prmt(sz, sz, 0x3232));  // (1024 + z, 1024 + z)
            const float s = __half2float(__ushort_as_half((unsigned short)(sz & 0xffffu)));
            const unsigned words[4] = {w.x, w.y, w.z, w.w};
            __half2 a0[GEMV_MB], a1[GEMV_MB];
#pragma unroll
            for (int m = 0; m < GEMV_MB; ++m) a0[m] = a1[m] = __float2half2_rn(0.f);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                __half2 d[4];  // d[i] = (q_{2i} - z, q_{2i+1} - z): in order
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    d[i] = __hsub2(as_h2(lop3_and_or(words[q] >> (4 * i), 0x000F000Fu, 0x64006400u)), zh);
#pragma unroll
                for (int m = 0; m < GEMV_MB; ++m) {
                    if (GEMV_MB > 1 && m >= M) break;
                    const uint4 xv = *reinterpret_cast<const uint4*>(xs + m * ldx + c * 40 + q * 8);
                    a0[m] = __hfma2(d[0], as_h2(xv.x), a0[m]);
                    a1[m] = __hfma2(d[1], as_h2(xv.y), a1[m]);
                    a0[m] = __hfma2(d[2], as_h2(xv.z), a0[m]);
                    a1[m] = __hfma2(d[3], as_h2(xv.w), a1[m]);
                }
            }
#pragma unroll
            for (int m = 0; m < GEMV_MB; ++m) {
                if (GEMV_MB > 1 && m >= M) break;
                const float2 s0 = __half22float2(a0[m]), s1 = __half22float2(a1[m]);
                acc[m] = fmaf(s, (s0.x + s0.y) + (s1.x + s1.y), acc[m]);
            }
        }
    }
    ladder_store(y, acc, active, row, M, N);
}

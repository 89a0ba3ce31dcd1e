// The chapter's reference kernels, kept as the "before": one warp per output row, lanes stride over K, fp32
// activations, fp32 scales and zero points, shift-and-mask dequant, warp-shuffle reduction. Not tuned.
// Batch: GEMV_MB activation rows (runtime M <= GEMV_MB), each weight read once for all of them. 4 warps per block.
#ifndef GEMV_MB
#define GEMV_MB 1
#endif

__device__ __forceinline__ float ref_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// y[m, n] = sum_k x[m, k] * W[n, k]; W fp32 N x K.
extern "C" __global__ void gemv_fp32(const float* W, const float* x, float* y, int M, int N, int K) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int k = lane; k < K; k += 32) {
        const float w = W[(size_t)row * K + k];
#pragma unroll
        for (int m = 0; m < GEMV_MB; ++m)
            if (m < M) acc[m] += w * x[(size_t)m * K + k];
    }
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        const float s = ref_warp_sum(acc[m]);
        if (lane == 0 && m < M) y[(size_t)m * N + row] = s;
    }
}

// W4: Wq uint32 N x K/8, eight 4-bit codes per word, low nibble first; scales and zeros fp32 N x K/G;
// w = (q - z) * s.
extern "C" __global__ void gemv_w4(const unsigned* Wq, const float* scales, const float* zeros, const float* x,
                                   float* y, int M, int N, int K, int G) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= N) return;
    const int words = K / 8, groups = K / G;
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int i = lane; i < words; i += 32) {
        const unsigned packed = Wq[(size_t)row * words + i];
        const int g = (i * 8) / G;
        const float s = scales[(size_t)row * groups + g];
        const float z = zeros[(size_t)row * groups + g];
        for (int j = 0; j < 8; ++j) {
            const float w = ((float)((packed >> (4 * j)) & 0xFu) - z) * s;
#pragma unroll
            for (int m = 0; m < GEMV_MB; ++m)
                if (m < M) acc[m] += w * x[(size_t)m * K + i * 8 + j];
        }
    }
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        const float s = ref_warp_sum(acc[m]);
        if (lane == 0 && m < M) y[(size_t)m * N + row] = s;
    }
}

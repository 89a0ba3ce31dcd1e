// The chapter's reference kernels as the chapter writes them, kept as the "before": one warp per output row, 4 warps
// per block, the activations staged in shared memory (fp32), lanes stride over K, fp32 scales and zero points with a
// compile-time group size, shift-and-mask dequant, warp-shuffle reduction. Not tuned.
//
// Batch: the chapter's program is batch 1 (x, K floats, staged once per block). Here the block stages rows m < M of
// x (M <= GEMV_MB) in K-tiles of KT columns that fit in the shared memory the launcher gives it (kernels/gemv/gemv.py,
// `x_tile`): KT = K whenever GEMV_MB x K floats fit in 48 KB, so at M = 1 (K <= 12288) there is one tile and the
// code path is the chapter's (one staging, one barrier, then the warp-per-row loop); larger M or K take more tiles,
// each staged between two barriers. Each weight is read once for all M rows.
//
// Compile-time: GEMV_MB (activation rows per launch, runtime M <= GEMV_MB), W4_GROUP (weights per scale/zero group
// along K: a constant, as in the chapter, so the group index is a shift).
#ifndef GEMV_MB
#define GEMV_MB 1
#endif
#ifndef W4_GROUP
#define W4_GROUP 128
#endif

__device__ __forceinline__ float ref_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Rows m < M of x[:, k0 : k0 + kt] into xs (row stride KT floats), one float per thread per step (the chapter's loop).
__device__ __forceinline__ void ref_stage_x(float* xs, const float* x, int M, int K, int k0, int kt, int KT) {
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        if (GEMV_MB > 1 && m >= M) break;
        for (int i = threadIdx.x; i < kt; i += blockDim.x) xs[m * KT + i] = x[(size_t)m * K + k0 + i];
    }
}

__device__ __forceinline__ void ref_store(float* y, const float (&acc)[GEMV_MB], bool active, int row, int M, int N) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        const float s = ref_warp_sum(acc[m]);
        if (active && lane == 0 && (GEMV_MB == 1 || m < M)) y[(size_t)m * N + row] = s;
    }
}

// y[m, n] = sum_k x[m, k] * W[n, k]; W fp32 N x K. Dynamic shared memory: GEMV_MB * KT floats.
extern "C" __global__ void gemv_fp32(const float* W, const float* x, float* y, int M, int N, int K, int KT) {
    extern __shared__ float xs[];
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const bool active = row < N;  // no early return: every thread takes part in the staging barriers
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KT) {
        const int kt = min(KT, K - k0);
        if (k0) __syncthreads();  // every warp is done with the previous tile
        ref_stage_x(xs, x, M, K, k0, kt, KT);
        __syncthreads();
        if (active) {
            const float* w = W + (size_t)row * K + k0;
            for (int k = lane; k < kt; k += 32) {
                const float wk = w[k];
#pragma unroll
                for (int m = 0; m < GEMV_MB; ++m)
                    if (GEMV_MB == 1 || m < M) acc[m] += wk * xs[m * KT + k];
            }
        }
    }
    ref_store(y, acc, active, row, M, N);
}

// W4: Wq uint32 N x K/8, eight 4-bit codes per word, low nibble first (weight 8i + j in bits 4j..4j+3 of word i);
// scales and zeros fp32 N x K/W4_GROUP; w = (q - z) * s. Dynamic shared memory: GEMV_MB * KT floats (KT % 8 == 0).
extern "C" __global__ void gemv_w4(const unsigned* Wq, const float* scales, const float* zeros, const float* x,
                                   float* y, int M, int N, int K, int KT) {
    extern __shared__ float xs[];
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const bool active = row < N;
    const int words = K / 8, groups = K / W4_GROUP;
    float acc[GEMV_MB];
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) acc[m] = 0.f;
    for (int k0 = 0; k0 < K; k0 += KT) {
        const int kt = min(KT, K - k0);
        if (k0) __syncthreads();
        ref_stage_x(xs, x, M, K, k0, kt, KT);
        __syncthreads();
        if (active) {
            const unsigned* wrow = Wq + (size_t)row * words + k0 / 8;
            for (int i = lane; i < kt / 8; i += 32) {
                const unsigned packed = wrow[i];
                const int g = (k0 + i * 8) / W4_GROUP;
                const float s = scales[(size_t)row * groups + g];
                const float z = zeros[(size_t)row * groups + g];
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const float w = ((float)((packed >> (4 * j)) & 0xFu) - z) * s;
#pragma unroll
                    for (int m = 0; m < GEMV_MB; ++m)
                        if (GEMV_MB == 1 || m < M) acc[m] += w * xs[m * KT + i * 8 + j];
                }
            }
        }
    }
    ref_store(y, acc, active, row, M, N);
}

// The chapter's gemv_w4 at batch 1, statement for statement, as nvcc compiles it: nvcc 13.0 unrolls its word loop by 2
// on its own and NVRTC 13.0 does not (4 global loads in the SASS against nvcc's 10, 63.3 against 60.0 us on an H100 at
// 22016x4096); the pragma gives NVRTC nvcc's SASS (256 instructions, the same mix) and time (60.1 us). The launcher
// takes it for M = 1 when x fits the shared memory whole (kernels/gemv/gemv.py make_launch); W4_GROUP is its GROUP.
extern "C" __global__ void gemv_w4_m1(const unsigned int* Wq, const float* scales, const float* zeros,
                                      const float* x, float* y, int N, int K) {
    extern __shared__ float xs[];
    for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    int words = K / 8, groups = K / W4_GROUP;
    float acc = 0.f;
#pragma unroll 2
    for (int i = lane; i < words; i += 32) {
        unsigned int packed = Wq[(size_t)row * words + i];
        int g = (i * 8) / W4_GROUP;
        float s = scales[(size_t)row * groups + g];
        float z = zeros[(size_t)row * groups + g];
        for (int j = 0; j < 8; ++j) {
            float w = ((float)((packed >> (4 * j)) & 0xF) - z) * s;
            acc += w * xs[i * 8 + j];
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    if (lane == 0) y[row] = acc;
}

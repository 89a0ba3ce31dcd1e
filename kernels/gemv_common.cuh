// Shared skeleton of the GEMV-class kernels (batch M <= 16): y[m, n] = sum_k x[m, k] * W[n, k].
//
// Geometry: a block owns a tile of GEMV_RW weight rows at a time and walks the tiles grid-stride (persistent grid).
// Its warps split K: thread t reads the 16-byte chunks t, t + blockDim, t + 2 blockDim, ... of each row, so the
// whole block reads contiguous 16-byte pieces (coalesced) and each lane has GEMV_U x GEMV_RW loads in flight.
// Partial sums are reduced by warp shuffles, then across warps through shared memory.
//
// Compile-time configuration (NVRTC -D options; defaults here so the file compiles on its own):
//   GEMV_MB   activation rows held per launch (M <= MB; rows m >= M are zero-padded)
//   GEMV_RW   weight rows per tile
//   GEMV_U    16-byte chunks per row issued before the first is used
//   GEMV_XREG 1: a single pass over K (blockDim * U >= chunks per row), x held in registers for all tiles;
//             0: x re-read (through L1) for every chunk.
// A scheme supplies a policy P with: Acc (accumulator type), XRow (one x row's slice for one chunk), Dec (one
// decoded weight chunk), wrow(row), load_x(XRow&, m, c), decode(Dec&, uint4, row, c), fma(Acc&, Dec, XRow),
// store(row, m, Acc). Weights are decoded once per chunk and used for all M rows of x.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef GEMV_MB
#define GEMV_MB 1
#endif
#ifndef GEMV_RW
#define GEMV_RW 1
#endif
#ifndef GEMV_U
#define GEMV_U 4
#endif
#ifndef GEMV_XREG
#define GEMV_XREG 0
#endif

#define GEMV_MAX_WARPS 32

// Streaming 16-byte load: read-only path, no L1 allocation (weights are read once).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ int warp_sum(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// d = (a & b) | c in one instruction (immLut 0xEA).
__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ float2 h2_to_f2(unsigned u) {
    __half2 h = *reinterpret_cast<__half2*>(&u);
    return __half22float2(h);
}

// bf16 pair -> two floats: a bf16 is the top half of an fp32.
__device__ __forceinline__ float2 bf2_to_f2(unsigned u) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

struct F8 { float v[8]; };
struct F16x { float v[16]; };

__device__ __forceinline__ void fma8(float& a, const float* w, const float* x) {
#pragma unroll
    for (int j = 0; j < 8; ++j) a = fmaf(w[j], x[j], a);
}

// Load 8 fp16 (16 bytes) of x as floats.
__device__ __forceinline__ void load8_f16(float* dst, const __half* src) {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
    float2 a = h2_to_f2(v.x), b = h2_to_f2(v.y), c = h2_to_f2(v.z), d = h2_to_f2(v.w);
    dst[0] = a.x; dst[1] = a.y; dst[2] = b.x; dst[3] = b.y;
    dst[4] = c.x; dst[5] = c.y; dst[6] = d.x; dst[7] = d.y;
}

template <class P>
__device__ __forceinline__ void gemv_run(const P& p, int M, int N, int nchunks) {
    constexpr int MB = GEMV_MB, RW = GEMV_RW, U = GEMV_U;
    typedef typename P::Acc Acc;
    typedef typename P::XRow XRow;
    typedef typename P::Dec Dec;
    __shared__ Acc red[GEMV_MAX_WARPS][RW][MB];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int stride = blockDim.x;
#if GEMV_XREG
    XRow xr[U][MB];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int c = threadIdx.x + u * stride;
#pragma unroll
        for (int m = 0; m < MB; ++m)
            if (c < nchunks && m < M) p.load_x(xr[u][m], m, c);
    }
#endif
    const int ntiles = (N + RW - 1) / RW;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        Acc acc[RW][MB];
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[r][m] = Acc(0);
        int rows[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r) rows[r] = min(tile * RW + r, N - 1);
#if GEMV_XREG
        {
            const int c0 = threadIdx.x;
#else
        for (int c0 = threadIdx.x; c0 < nchunks; c0 += stride * U) {
#endif
            uint4 w[U][RW];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int c = c0 + u * stride;
#pragma unroll
                for (int r = 0; r < RW; ++r)
                    if (c < nchunks) w[u][r] = ld_stream(p.wrow(rows[r]) + c);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int c = c0 + u * stride;
                if (c < nchunks) {
                    Dec d[RW];
#pragma unroll
                    for (int r = 0; r < RW; ++r) p.decode(d[r], w[u][r], rows[r], c);
#pragma unroll
                    for (int m = 0; m < MB; ++m) {
                        if (m < M) {
#if GEMV_XREG
                            const XRow& xv = xr[u][m];
#else
                            XRow xv;
                            p.load_x(xv, m, c);
#endif
#pragma unroll
                            for (int r = 0; r < RW; ++r) p.fma(acc[r][m], d[r], xv);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                Acc v = warp_sum(acc[r][m]);
                if (lane == 0) red[warp][r][m] = v;
            }
        __syncthreads();
        if (threadIdx.x < RW * MB) {
            const int r = threadIdx.x / MB, m = threadIdx.x % MB;
            const int row = tile * RW + r;
            if (m < M && row < N) {
                Acc s = red[0][r][m];
                for (int q = 1; q < nwarps; ++q) s += red[q][r][m];
                p.store(row, m, s);
            }
        }
        __syncthreads();
    }
}

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
//   GEMV_PREFETCH (with XREG 0) 1: the next step's weights are loaded before this step is computed (two steps of
//             loads in flight per thread, also across the block reduction); 0: load, then compute.
// A scheme supplies a policy P with: Acc (accumulator type), XRow (one x row's slice for one chunk), Dec (one
// decoded weight chunk), wrow(row), load_x(XRow&, m, c), decode(Dec&, uint4, row, c), fma(Acc&, Dec, XRow),
// store(row, m, Acc). Weights are decoded once per chunk and used for all M rows of x.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "ptx.cuh"

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
#ifndef GEMV_PREFETCH
#define GEMV_PREFETCH 0
#endif

#define GEMV_MAX_WARPS 32

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
__device__ __forceinline__ void load_tile(const P& p, uint4 (&w)[GEMV_U][GEMV_RW], int tile, int N, int c0,
                                          int stride, int nchunks) {
#pragma unroll
    for (int u = 0; u < GEMV_U; ++u) {
        const int c = c0 + u * stride;
#pragma unroll
        for (int r = 0; r < GEMV_RW; ++r)
            if (c < nchunks) w[u][r] = ld_stream(p.wrow(min(tile * GEMV_RW + r, N - 1)) + c);
    }
}

// Reduce acc[RW][MB] over the block (warp shuffles, then shared memory) and store the outputs of one tile.
template <class P>
__device__ __forceinline__ void reduce_store(const P& p, typename P::Acc (&acc)[GEMV_RW][GEMV_MB], int tile, int M,
                                             int N) {
    constexpr int MB = GEMV_MB, RW = GEMV_RW;
    typedef typename P::Acc Acc;
    __shared__ Acc red[GEMV_MAX_WARPS][RW][MB];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            Acc v = warp_sum(acc[r][m]);
            if (lane == 0) red[warp][r][m] = v;
        }
    __syncthreads();
    for (int i = threadIdx.x; i < RW * MB; i += blockDim.x) {
        const int r = i / MB, m = i % MB;
        const int row = tile * RW + r;
        if (m < M && row < N) {
            Acc s = red[0][r][m];
            for (int q = 1; q < nwarps; ++q) s += red[q][r][m];
            p.store(row, m, s);
        }
    }
    __syncthreads();
}

// Decode one chunk of each of the RW rows once and multiply it with the M rows of x.
template <class P, class XSrc>
__device__ __forceinline__ void chunk_fma(const P& p, typename P::Acc (&acc)[GEMV_RW][GEMV_MB],
                                          const uint4 (&w)[GEMV_RW], int tile, int N, int c, int M, const XSrc& xs) {
    typename P::Dec d[GEMV_RW];
#pragma unroll
    for (int r = 0; r < GEMV_RW; ++r) p.decode(d[r], w[r], min(tile * GEMV_RW + r, N - 1), c);
#pragma unroll
    for (int m = 0; m < GEMV_MB; ++m) {
        if (m < M) {
            typename P::XRow xv;
            xs.get(xv, m);
#pragma unroll
            for (int r = 0; r < GEMV_RW; ++r) p.fma(acc[r][m], d[r], xv);
        }
    }
}

template <class P>
struct XFromRegs {
    const typename P::XRow* rows;
    __device__ void get(typename P::XRow& xv, int m) const { xv = rows[m]; }
};

template <class P>
struct XFromMem {
    const P& p;
    int c;
    __device__ void get(typename P::XRow& xv, int m) const { p.load_x(xv, m, c); }
};

template <class P>
__device__ __forceinline__ void gemv_run(const P& p, int M, int N, int nchunks) {
    constexpr int MB = GEMV_MB, RW = GEMV_RW, U = GEMV_U;
    typedef typename P::Acc Acc;
    const int stride = blockDim.x;
    const int ntiles = (N + RW - 1) / RW;
#if GEMV_XREG
    // One pass over K: x for this thread's U chunks stays in registers for every tile; the weights of the next tile
    // are loaded before this tile is computed and reduced, so loads stay in flight across the block reduction.
    typename P::XRow xr[U][MB];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int c = threadIdx.x + u * stride;
#pragma unroll
        for (int m = 0; m < MB; ++m)
            if (c < nchunks && m < M) p.load_x(xr[u][m], m, c);
    }
    uint4 wn[U][RW];
    int tile = blockIdx.x;
    if (tile < ntiles) load_tile(p, wn, tile, N, threadIdx.x, stride, nchunks);
    for (; tile < ntiles; tile += gridDim.x) {
        uint4 w[U][RW];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < RW; ++r) w[u][r] = wn[u][r];
        if (tile + (int)gridDim.x < ntiles) load_tile(p, wn, tile + gridDim.x, N, threadIdx.x, stride, nchunks);
        Acc acc[RW][MB];
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[r][m] = Acc(0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = threadIdx.x + u * stride;
            if (c < nchunks) chunk_fma(p, acc, w[u], tile, N, c, M, XFromRegs<P>{xr[u]});
        }
        reduce_store(p, acc, tile, M, N);
    }
#elif GEMV_PREFETCH
    // x re-read through L1; the weights of the next step (the next U chunks of this tile, or the first U chunks of
    // the next tile) are loaded before this step is computed, so a thread keeps two steps of loads in flight and
    // loads stay in flight across the block reduction. Every thread walks the same number of steps (out-of-range
    // chunks are skipped by load_tile and by the compute guard).
    const int span = stride * U;
    const int steps = (nchunks + span - 1) / span;
    uint4 wn[U][RW];
    int tile = blockIdx.x;
    if (tile < ntiles) load_tile(p, wn, tile, N, threadIdx.x, stride, nchunks);
    for (; tile < ntiles; tile += gridDim.x) {
        Acc acc[RW][MB];
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[r][m] = Acc(0);
        for (int s = 0; s < steps; ++s) {
            uint4 w[U][RW];
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int r = 0; r < RW; ++r) w[u][r] = wn[u][r];
            const bool last = s + 1 == steps;
            const int ntile = last ? tile + (int)gridDim.x : tile;
            if (ntile < ntiles) load_tile(p, wn, ntile, N, threadIdx.x + (last ? 0 : (s + 1) * span), stride, nchunks);
            const int c0 = threadIdx.x + s * span;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int c = c0 + u * stride;
                if (c < nchunks) chunk_fma(p, acc, w[u], tile, N, c, M, XFromMem<P>{p, c});
            }
        }
        reduce_store(p, acc, tile, M, N);
    }
#else
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        Acc acc[RW][MB];
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[r][m] = Acc(0);
        for (int c0 = threadIdx.x; c0 < nchunks; c0 += stride * U) {
            uint4 w[U][RW];
            load_tile(p, w, tile, N, c0, stride, nchunks);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int c = c0 + u * stride;
                if (c < nchunks) chunk_fma(p, acc, w[u], tile, N, c, M, XFromMem<P>{p, c});
            }
        }
        reduce_store(p, acc, tile, M, N);
    }
#endif
}

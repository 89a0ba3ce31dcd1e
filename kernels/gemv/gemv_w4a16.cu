// Optimized W4A16 GEMV: int4 weights in groups of G along K (fp16 scale + zero point), fp16 activations.
//
// Layout (built offline by kernels/quant/pack_w4.py from the canonical codes):
//   Wp  uint32 [N, K/8]: word j of a row holds k = 8j..8j+7, element e in nibble (e even: e/2, e odd: 4 + e/2), so
//       (w >> 4i) & 0x000F000F yields the pair (k = 8j + 2i, 8j + 2i + 1) in the two halves; four words = one
//       16-byte chunk of 32 weights, read coalesced.
//   SZ  uint32 [N, K/G]: low half = fp16 scale s, high half = fp16 (1024 + z), one word per (row, group).
// Dequant: lop3 (w & 0x000F000F) | 0x64006400 is the half2 (1024 + q) exactly (the 0x6400 magic number) and one
// hsub2 with (1024 + z) gives q - z exactly; the odd nibbles are masked in place (0x00F000F0: 1024 + 16 q) and one
// hfma2 (x 1/16, -(64 + z)) gives q - z, so a word costs one shift, four lop3 and four half2 ops for 8 weights. Products with x accumulate in half2 over one chunk (8 products per
// half, |q - z| <= 15), then in fp32; the scale is applied once per chunk (a chunk never straddles a group: G % 32 == 0).
#include "gemv_common.cuh"

struct H32 { __half2 v[16]; };
struct W4Dec { __half2 d[16]; float s; };

struct PolicyW4A16 {
    typedef float Acc;
    typedef H32 XRow;
    typedef W4Dec Dec;
    const uint4* W; const unsigned* SZ; const __half* x; __half* y; int N, K, rowchunks, ngroups, gshift;
    __device__ const uint4* wrow(int row) const { return W + (size_t)row * rowchunks; }
    __device__ void load_x(XRow& f, int m, int c) const {
        const uint4* src = reinterpret_cast<const uint4*>(x + (size_t)m * K + c * 32);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            uint4 v = __ldg(src + q);
            f.v[4 * q + 0] = *reinterpret_cast<__half2*>(&v.x);
            f.v[4 * q + 1] = *reinterpret_cast<__half2*>(&v.y);
            f.v[4 * q + 2] = *reinterpret_cast<__half2*>(&v.z);
            f.v[4 * q + 3] = *reinterpret_cast<__half2*>(&v.w);
        }
    }
    __device__ void decode(Dec& dec, const uint4& w, int row, int c) const {
        const unsigned sz = __ldg(SZ + (size_t)row * ngroups + (c >> gshift));
        const unsigned zz = prmt(sz, sz, 0x3232);  // (1024 + z, 1024 + z)
        const __half2 zh = *reinterpret_cast<const __half2*>(&zz);
        dec.s = __half2float(__ushort_as_half((unsigned short)(sz & 0xffffu)));
        // Nibble pairs at bits 0-3/16-19 give 1024 + q (hsub2 with 1024 + z); pairs at bits 4-7/20-23 are masked in
        // place and give 1024 + 16 q, so one hfma2 (x 1/16, - (64 + z)) yields q - z with no shift: one shift per word.
        const __half2 z16 = __hsub2(__float2half2_rn(960.f), zh);  // -(64 + z)
        const __half2 sixteenth = __float2half2_rn(0.0625f);
        const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned lo = words[j], hi = words[j] >> 8;
            unsigned h0 = lop3_and_or(lo, 0x000F000Fu, 0x64006400u);
            unsigned h1 = lop3_and_or(lo, 0x00F000F0u, 0x64006400u);
            unsigned h2 = lop3_and_or(hi, 0x000F000Fu, 0x64006400u);
            unsigned h3 = lop3_and_or(hi, 0x00F000F0u, 0x64006400u);
            dec.d[4 * j + 0] = __hsub2(*reinterpret_cast<__half2*>(&h0), zh);
            dec.d[4 * j + 1] = __hfma2(*reinterpret_cast<__half2*>(&h1), sixteenth, z16);
            dec.d[4 * j + 2] = __hsub2(*reinterpret_cast<__half2*>(&h2), zh);
            dec.d[4 * j + 3] = __hfma2(*reinterpret_cast<__half2*>(&h3), sixteenth, z16);
        }
    }
    __device__ void fma(float& a, const Dec& dec, const XRow& f) const {
        __half2 a0 = __float2half2_rn(0.f), a1 = a0;
#pragma unroll
        for (int p = 0; p < 16; p += 2) {
            a0 = __hfma2(dec.d[p], f.v[p], a0);
            a1 = __hfma2(dec.d[p + 1], f.v[p + 1], a1);
        }
        const float2 s0 = __half22float2(a0), s1 = __half22float2(a1);
        a = fmaf(dec.s, (s0.x + s0.y) + (s1.x + s1.y), a);
    }
    __device__ void store(int row, int m, float v) const { y[(size_t)m * N + row] = __float2half_rn(v); }
};

extern "C" __global__ void gemv_w4a16(const uint4* W, const unsigned* SZ, const __half* x, __half* y,
                                      int M, int N, int K, int gshift) {
    PolicyW4A16 p{W, SZ, x, y, N, K, K / 32, K >> (gshift + 5), gshift};
    gemv_run(p, M, N, K / 32);
}

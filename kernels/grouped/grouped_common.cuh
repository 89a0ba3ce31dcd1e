// Shared device code of the grouped MoE kernels (grouped_gemv.cu and the tensor-core ones): the list of touched
// experts, and the routed x rows of a pass.
#pragma once

#define GROUPED_MAX_E 1024

// The experts with at least one routed row (offsets[e + 1] > offsets[e]), in ascending order, compacted into `list`
// by warp 0 with ballots (so every CTA builds the same list); returns their number after a __syncthreads. E must be
// at most GROUPED_MAX_E.
__device__ __forceinline__ int touched_experts(const int* offsets, int E, short* list) {
  __shared__ int n;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int count = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      const bool used = e < E && __ldg(offsets + e + 1) > __ldg(offsets + e);
      const unsigned mask = __ballot_sync(0xffffffffu, used);
      if (used) list[count + __popc(mask & ((1u << lane) - 1u))] = (short)e;
      count += __popc(mask);
    }
    if (lane == 0) n = count;
  }
  __syncthreads();
  return n;
}

// The x row of each of this lane's batch rows g + 8 j of a pass (rows m0 .. m0 + M - 1 of an expert whose routed rows
// start at `start`): rows[start + m0 + m] with gather, else start + m0 + m; -1 past the pass's M rows.
template <int NT>
__device__ __forceinline__ void routed_rows(int (&xr)[NT], const int* rows, int start, int m0, int M, int g,
                                            int gather) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int m = g + 8 * j;
    xr[j] = m < M ? (gather ? __ldg(rows + start + m0 + m) : start + m0 + m) : -1;
  }
}

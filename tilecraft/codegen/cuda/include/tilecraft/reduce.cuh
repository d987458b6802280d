// Warp-shuffle reductions. `warp_reduce<Threads, Stride>(v, op)` combines the values of
// `Threads` lanes spaced `Stride` apart (lanes l, l^Stride, l^2*Stride, ...); every participating
// lane gets the result (butterfly). Threads * Stride must be <= 32 and both powers of two.
// Example: the 4 lanes of an mma accumulator row quad: warp_reduce<4, 1>(v, SumOp()).
#pragma once
#include "tilecraft/common.cuh"
#include "tilecraft/math.cuh"

namespace tc {

struct SumOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return a + b; }
};
// NaN-propagating (tc::maximum / tc::minimum, math.cuh): a NaN in any lane reaches every lane.
struct MaxOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return maximum<T>(a, b); }
};
struct MinOp {
  template <class T> TC_DEVICE T operator()(T a, T b) const { return minimum<T>(a, b); }
};

template <int Threads = 32, int Stride = 1, class T, class Op>
TC_DEVICE T warp_reduce(T v, Op op, unsigned mask = 0xffffffffu) {
  static_assert(Threads * Stride <= 32, "a warp reduction spans at most 32 lanes");
  static_assert((Threads & (Threads - 1)) == 0 && (Stride & (Stride - 1)) == 0,
                "Threads and Stride must be powers of two");
#pragma unroll
  for (int offset = Threads * Stride / 2; offset >= Stride; offset /= 2) {
    v = op(v, __shfl_xor_sync(mask, v, offset));
  }
  return v;
}

template <int Threads = 32, int Stride = 1, class T>
TC_DEVICE T warp_reduce_sum(T v) { return warp_reduce<Threads, Stride>(v, SumOp()); }
template <int Threads = 32, int Stride = 1, class T>
TC_DEVICE T warp_reduce_max(T v) { return warp_reduce<Threads, Stride>(v, MaxOp()); }
template <int Threads = 32, int Stride = 1, class T>
TC_DEVICE T warp_reduce_min(T v) { return warp_reduce<Threads, Stride>(v, MinOp()); }
template <int Threads = 32, int Stride = 1>
TC_DEVICE float warp_reduce_abssum(float v) {
  return warp_reduce<Threads, Stride>(fabsf(v), SumOp());
}
template <int Threads = 32, int Stride = 1>
TC_DEVICE float warp_reduce_absmax(float v) {
  return warp_reduce<Threads, Stride>(fabsf(v), MaxOp());
}

// All-reduce across the NumWarps warps of a block: each warp reduces, lane 0 writes `scratch`
// (NumWarps elements of shared memory), then every thread combines the partial results.
// Contains two __syncthreads(); every thread of the block must call it.
template <int NumWarps, class T, class Op>
TC_DEVICE T block_all_reduce(T v, Op op, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce<32>(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
#pragma unroll
  for (int w = 1; w < NumWarps; ++w) r = op(r, scratch[w]);
  __syncthreads();
  return r;
}

}  // namespace tc

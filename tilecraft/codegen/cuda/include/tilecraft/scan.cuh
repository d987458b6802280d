// Warp-level inclusive prefix sum for T.cumsum: after `v = tc::warp_inclusive_scan(v)` lane l
// holds v[0] + ... + v[l] of the warp's lanes (Hillis-Steele over __shfl_up_sync, 5 steps).
// Every lane of the warp must call it. T is float, double, int, long long or their unsigned.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

template <class T>
TC_DEVICE T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const T u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

}  // namespace tc

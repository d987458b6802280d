"""Handwritten CUDA kernels shared by the runtime tests (CPU compile tests and GPU launches)."""

#: Uses every header of the device library; one warp computes C[16,8] = A[16,16] @ B[8,16]^T
#: with cp.async -> ldmatrix -> mma.sync, plus row sums (warp shuffle) and a total (atomics).
MMA_KERNEL = r"""
#include "tilecraft/common.cuh"
#include "tilecraft/mma.cuh"
#include "tilecraft/ldmatrix.cuh"
#include "tilecraft/cp_async.cuh"
#include "tilecraft/reduce.cuh"
#include "tilecraft/atomic.cuh"
#include "tilecraft/math.cuh"
#include "tilecraft/sync.cuh"

extern "C" __global__ void __launch_bounds__(32)
mma_16x8x16(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C,
            float* __restrict__ row_sum, float* __restrict__ total, float* __restrict__ row_max) {
  __shared__ __align__(128) __half A_s[16 * 16];
  __shared__ __align__(128) __half B_s[16 * 16];  // rows 8..15 are zero-filled padding
  const int lane = threadIdx.x;
  tc::cp_async_16(A_s + lane * 8, A + lane * 8);
  tc::cp_async_16(B_s + lane * 8, lane < 16 ? B + lane * 8 : B, lane < 16);
  tc::cp_async_commit();
  tc::cp_async_wait<0>();
  tc::sync_threads();

  tc::u32 a[4], b[2];
  const int mat = lane / 8, r = lane % 8;
  tc::ldmatrix_x4(a, A_s + (r + (mat % 2) * 8) * 16 + (mat / 2) * 8);
  tc::ldmatrix_x2(b, B_s + r * 16 + ((lane / 8) % 2) * 8);
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  tc::mma_m16n8k16_f16_f32(c, a, b, c);

  const int g = lane / 4, col = 2 * (lane % 4);
  C[g * 8 + col] = c[0];
  C[g * 8 + col + 1] = c[1];
  C[(g + 8) * 8 + col] = c[2];
  C[(g + 8) * 8 + col + 1] = c[3];

  float s0 = tc::warp_reduce_sum<4>(c[0] + c[1]);
  float s1 = tc::warp_reduce_sum<4>(c[2] + c[3]);
  float m0 = tc::warp_reduce_max<4>(fmaxf(c[0], c[1]));
  float m1 = tc::warp_reduce_max<4>(fmaxf(c[2], c[3]));
  if (lane % 4 == 0) {
    row_sum[g] = s0;
    row_sum[g + 8] = s1;
    tc::atomic_max(row_max + g, m0);
    tc::atomic_max(row_max + g + 8, m1);
  }
  tc::atomic_add(total, c[0] + c[1] + c[2] + c[3]);
}
"""

#: Calls every function of the header library once (compile coverage for sm_80 and sm_90a).
ALL_HEADERS_KERNEL = r"""
#include "tilecraft/common.cuh"
#include "tilecraft/mma.cuh"
#include "tilecraft/ldmatrix.cuh"
#include "tilecraft/cp_async.cuh"
#include "tilecraft/reduce.cuh"
#include "tilecraft/atomic.cuh"
#include "tilecraft/math.cuh"
#include "tilecraft/sync.cuh"

extern "C" __global__ void __launch_bounds__(128)
everything(const __half* __restrict__ g, float* __restrict__ out, __half* hout,
           __nv_bfloat16* bout, int* iout) {
  __shared__ __align__(128) __half s[128 * 8];
  __shared__ float scratch[4];
  const int t = threadIdx.x;
  tc::cp_async_16(s + t * 8, g + t * 8, t < 100);
  tc::cp_async_ca<4>(scratch, g, t == 0);
  tc::cp_async_ca<8>(s, g, false);
  tc::cp_async_ca<16>(s + 8, g + 8);
  tc::cp_async_commit();
  tc::cp_async_wait<1>();
  tc::cp_async_wait_all();
  tc::sync_threads();

  tc::u32 r[4], rt[4];
  const __half* row = s + (t % 32) * 8;
  tc::ldmatrix_x1(r, row);
  tc::ldmatrix_x2(r, row);
  tc::ldmatrix_x4(r, row);
  tc::ldmatrix_x1_trans(rt, row);
  tc::ldmatrix_x2_trans(rt, row);
  tc::ldmatrix_x4_trans(rt, row);

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  tc::mma_m16n8k16_f16_f32(acc, r, rt, acc);
  tc::mma_m16n8k16_bf16_f32(acc, r, rt, acc);
  tc::mma_m16n8k8_f16_f32(acc, r, rt, acc);
  tc::mma_m16n8k8_tf32_f32(acc, r, rt, acc);
  tc::u32 hacc[2] = {0u, 0u};
  tc::mma_m16n8k16_f16_f16(hacc, r, rt, hacc);
  int iacc[4] = {0, 0, 0, 0};
  tc::mma_m16n8k32_s8_s32(iacc, r, rt, iacc);
#ifdef TC_HAS_MMA_FP8
  tc::mma_m16n8k32_e4m3_f32(acc, r, rt, acc);
#endif
#ifdef TC_HAS_STMATRIX
  tc::stmatrix_x1(s + 512 + (t % 32) * 8, r);
  tc::stmatrix_x2(s + 512 + (t % 32) * 8, r);
  tc::stmatrix_x4(s + 512 + (t % 32) * 8, r);
  tc::stmatrix_x1_trans(s + 512 + (t % 32) * 8, rt);
  tc::stmatrix_x2_trans(s + 512 + (t % 32) * 8, rt);
  tc::stmatrix_x4_trans(s + 512 + (t % 32) * 8, rt);
  tc::fence_proxy_async_shared();
#endif

  float x = acc[0] + acc[1] + acc[2] + acc[3] + float(iacc[0] + iacc[3]);
  float2 h2 = tc::unpack_half2(tc::pack_half2(x, 1.0f) ^ hacc[0]);
  float2 b2 = tc::unpack_bfloat2(tc::pack_bfloat2(x, 2.0f));
  x += h2.x + h2.y + b2.x + b2.y;
  x = tc::exp2_approx(x) + tc::log2_approx(x) + tc::rsqrt_approx(x) + tc::rcp_approx(x);
  x += tc::tanh_approx(x) + tc::exp_approx(x) + tc::log_approx(x) + tc::sigmoid_approx(x);
  x += tc::sigmoid(x) + tc::silu(x) + tc::gelu_tanh(x);
  x += tc::unpack_half2(tc::exp2_approx_f16x2(tc::pack_half2(x, x))).x;
  x = fminf(x, tc::infinity<float>());
  x += tc::cast<float>(tc::cast<__half>(x)) + tc::cast<float>(tc::cast<__nv_bfloat16>(x));
  x += tc::cast<float>(tc::infinity<__half>()) * 0.f + tc::cast<float>(tc::infinity<__nv_bfloat16>()) * 0.f;

  float sum = tc::warp_reduce_sum(x) + tc::warp_reduce_sum<4, 8>(x);
  float mx = tc::warp_reduce_max(x), mn = tc::warp_reduce_min(x);
  float as = tc::warp_reduce_abssum<8>(x), am = tc::warp_reduce_absmax<16, 2>(x);
  int isum = tc::warp_reduce_sum(t), imax = tc::warp_reduce_max(t), imin = tc::warp_reduce_min(t);
  __half hm = tc::warp_reduce_max(__float2half(x));
  __nv_bfloat16 bm = tc::warp_reduce_min(__float2bfloat16(x));
  float blk = tc::block_all_reduce<4>(sum + mx + mn + as + am, tc::SumOp(), scratch);

  tc::named_barrier_sync(1, 128);
  tc::named_barrier_arrive(2, 64);
  tc::sync_warp();
  tc::fence_block();
  tc::fence_device();

  tc::atomic_add(out, blk);
  tc::atomic_max(out + 1, x);
  tc::atomic_min(out + 2, x);
  tc::atomic_add(iout, isum);
  tc::atomic_max(iout + 1, imax);
  tc::atomic_min(iout + 2, imin);
  tc::atomic_add(hout, hm);
  tc::atomic_add(reinterpret_cast<__half2*>(hout) + 1, __halves2half2(hm, hm));
  tc::atomic_max(hout + 4, hm);
  tc::atomic_add(bout, bm);
  tc::atomic_add(reinterpret_cast<__nv_bfloat162*>(bout) + 1, __halves2bfloat162(bm, bm));
#ifdef TC_HAS_VECTOR_RED
  tc::red_add_v2(out + 4, x, x);
  tc::red_add_v4(out + 8, x, x, x, x);
#endif
#ifdef TC_HAS_CLUSTER
  tc::cluster_sync();
  out[16 + t] = float(tc::cluster_ctarank());
#endif
  tc::store_128(out + 32 + 4 * t, tc::load_128(s + 8 * (t % 64)));
  out[3] = float(tc::ceil_div(t, 32)) + float(tc::bit_cast<int>(x));
}
"""

#: Keeps 48 values live per thread under a 32-register cap: ptxas must spill.
SPILL_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(256, 8)
spilling(const float* __restrict__ x, float* y, int n) {
  __shared__ float sm[512];
  float a[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) a[i] = x[i * n + threadIdx.x];
  sm[threadIdx.x] = a[7];
  __syncthreads();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 48; ++i) s += a[i] * a[47 - i] * sm[(i * 7 + threadIdx.x) & 511] + a[(i * 5) % 48];
  y[threadIdx.x] = s;
}
"""

#: The simplest launchable kernel: out[i] = a[i] + b[i] for i < n.
VECTOR_ADD_KERNEL = r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""

#: A syntax error on line 4.
BROKEN_KERNEL = r"""
extern "C" __global__ void broken(float* x) {
  int i = threadIdx.x;
  x[i] = undefined_name + 1.0f;
}
"""

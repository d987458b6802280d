// Barriers and fences. Named barriers synchronise a subset of the block (e.g. one warpgroup):
// `nthreads` must be a multiple of 32 and every participating warp must use the same id.
// Id 0 is the barrier __syncthreads() uses.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

TC_DEVICE void sync_threads() { __syncthreads(); }
TC_DEVICE void sync_warp(unsigned mask = 0xffffffffu) { __syncwarp(mask); }

TC_DEVICE void named_barrier_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(nthreads) : "memory");
}
// Signal arrival without waiting (producer side of a producer/consumer pair).
TC_DEVICE void named_barrier_arrive(int id, int nthreads) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(nthreads) : "memory");
}

TC_DEVICE void fence_block() { __threadfence_block(); }
TC_DEVICE void fence_device() { __threadfence(); }
// After an acquire (an ordered atomic's fence): what it made visible to this thread's generic
// proxy, to its async proxy too, so TMA loads it issues next read what other blocks released
// (sm_90+; nothing to do before, where there is no TMA).
TC_DEVICE void fence_proxy_async_global() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TC_HAS_CLUSTER 1
// Make ordinary shared-memory writes visible to the async proxy (TMA, wgmma) of this CTA.
TC_DEVICE void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Warp specialization: a warpgroup gives back registers (the producer) or takes them (the
// consumer); every warp of the warpgroup executes it. sm_90a only.
template <int N>
TC_DEVICE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
}
template <int N>
TC_DEVICE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
}
// Barrier over all threads of all CTAs in the cluster.
TC_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
               ::: "memory");
}
// The element of block `rank` of the cluster at x's place in its shared memory (a generic
// address mapped by mapa; T.remote).
template <class T>
TC_DEVICE T ld_remote(const T& x, u32 rank) {
  unsigned long long p;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(p) : "l"(&x), "r"(rank));
  return *reinterpret_cast<const T*>(p);
}
TC_DEVICE u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
#endif

}  // namespace tc

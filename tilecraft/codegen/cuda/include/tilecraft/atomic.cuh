// Atomics on global or shared memory for the tile language's atomic_add / atomic_max / atomic_min.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

TC_DEVICE float atomic_add(float* addr, float v) { return atomicAdd(addr, v); }
TC_DEVICE int atomic_add(int* addr, int v) { return atomicAdd(addr, v); }
TC_DEVICE __half atomic_add(__half* addr, __half v) { return atomicAdd(addr, v); }
TC_DEVICE __half2 atomic_add(__half2* addr, __half2 v) { return atomicAdd(addr, v); }
TC_DEVICE __nv_bfloat16 atomic_add(__nv_bfloat16* addr, __nv_bfloat16 v) {
  return atomicAdd(addr, v);
}
TC_DEVICE __nv_bfloat162 atomic_add(__nv_bfloat162* addr, __nv_bfloat162 v) {
  return atomicAdd(addr, v);
}

// Float max/min via integer atomics: for non-negative floats the int order is the float order;
// for negative floats the unsigned order is the reverse. NaN inputs are not ordered.
TC_DEVICE float atomic_max(float* addr, float v) {
  unsigned* u = reinterpret_cast<unsigned*>(addr);
  int* i = reinterpret_cast<int*>(addr);
  return signbit(v) ? __uint_as_float(atomicMin(u, __float_as_uint(v)))
                    : __int_as_float(atomicMax(i, __float_as_int(v)));
}
TC_DEVICE float atomic_min(float* addr, float v) {
  unsigned* u = reinterpret_cast<unsigned*>(addr);
  int* i = reinterpret_cast<int*>(addr);
  return signbit(v) ? __uint_as_float(atomicMax(u, __float_as_uint(v)))
                    : __int_as_float(atomicMin(i, __float_as_int(v)));
}
TC_DEVICE int atomic_max(int* addr, int v) { return atomicMax(addr, v); }
TC_DEVICE int atomic_min(int* addr, int v) { return atomicMin(addr, v); }

// Half max via compare-and-swap on the containing aligned 32-bit word.
TC_DEVICE __half atomic_max(__half* addr, __half v) {
  unsigned* word = reinterpret_cast<unsigned*>(reinterpret_cast<size_t>(addr) & ~size_t(3));
  const unsigned shift = (reinterpret_cast<size_t>(addr) & 2) ? 16 : 0;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    __half cur = __ushort_as_half(static_cast<unsigned short>(assumed >> shift));
    if (!(v > cur)) return cur;
    unsigned repl = (assumed & ~(0xffffu << shift)) | (unsigned(__half_as_ushort(v)) << shift);
    old = atomicCAS(word, assumed, repl);
  } while (old != assumed);
  return __ushort_as_half(static_cast<unsigned short>(old >> shift));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TC_HAS_VECTOR_RED 1
// Vector reductions to global memory (sm_90+): 2 or 4 floats in one instruction, no return.
TC_DEVICE void red_add_v2(float* addr, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1,%2};\n" :: "l"(addr), "f"(a), "f"(b) : "memory");
}
TC_DEVICE void red_add_v4(float* addr, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};\n"
               :: "l"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
#endif

}  // namespace tc

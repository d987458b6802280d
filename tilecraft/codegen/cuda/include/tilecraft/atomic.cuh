// Atomics on global or shared memory for the tile language's atomic_add / atomic_max / atomic_min.
// tc::atomic_{add,max,min}(T* addr, T v) exist for every standard type: a hardware atomic where
// there is one, else a compare-and-swap loop on the aligned word holding the element, computing
// like the interpreter (16-bit and fp8 floats in float, rounded once; integers wrap).
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

namespace atomic_detail {

// The value a comparison or a sum is computed on: float for the 8/16-bit float types.
TC_DEVICE float num(__half x) { return __half2float(x); }
#ifndef TC_NO_BF16
TC_DEVICE float num(__nv_bfloat16 x) { return __bfloat162float(x); }
#endif
#ifndef TC_NO_FP8
TC_DEVICE float num(__nv_fp8_e4m3 x) { return float(x); }
TC_DEVICE float num(__nv_fp8_e5m2 x) { return float(x); }
#endif
template <class T> TC_DEVICE T num(T x) { return x; }

template <class T> TC_DEVICE unsigned to_bits(T x) {
  if constexpr (sizeof(T) == 1) return bit_cast<unsigned char>(x);
  else if constexpr (sizeof(T) == 2) return bit_cast<unsigned short>(x);
  else return bit_cast<unsigned>(x);
}
template <class T> TC_DEVICE T from_bits(unsigned b) {
  if constexpr (sizeof(T) == 1) return bit_cast<T>(static_cast<unsigned char>(b));
  else if constexpr (sizeof(T) == 2) return bit_cast<T>(static_cast<unsigned short>(b));
  else return bit_cast<T>(b);
}

// *addr = f(*addr) atomically, by compare-and-swap on the aligned 32- or 64-bit word holding it
// (1- and 2-byte elements share their word with neighbours, which are left unchanged).
template <class T, class F>
TC_DEVICE T update(T* addr, F f) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "atomics on 1, 2, 4 or 8-byte elements");
  if constexpr (sizeof(T) == 8) {
    unsigned long long* w = reinterpret_cast<unsigned long long*>(addr);
    unsigned long long old = *w, assumed;
    do {
      assumed = old;
      old = atomicCAS(w, assumed, bit_cast<unsigned long long>(f(bit_cast<T>(assumed))));
    } while (old != assumed);
    return bit_cast<T>(old);
  } else {
    const size_t a = reinterpret_cast<size_t>(addr);
    unsigned* w = reinterpret_cast<unsigned*>(a & ~size_t(3));
    const unsigned shift = sizeof(T) == 4 ? 0u : unsigned(a & 3) * 8u;
    const unsigned mask = sizeof(T) == 4 ? 0xffffffffu : ((1u << (8 * sizeof(T))) - 1u) << shift;
    unsigned old = *w, assumed;
    do {
      assumed = old;
      const T cur = from_bits<T>((assumed & mask) >> shift);
      const unsigned next = (assumed & ~mask) | ((to_bits(f(cur)) << shift) & mask);
      old = atomicCAS(w, assumed, next);
    } while (old != assumed);
    return from_bits<T>((old & mask) >> shift);
  }
}

}  // namespace atomic_detail

// The general forms (any standard type); the overloads below take the hardware atomics.
// max/min propagate NaN, as the interpreter's numpy maximum/minimum do.
template <class T> TC_DEVICE T atomic_add(T* addr, T v) {
  using atomic_detail::num;
  return atomic_detail::update(addr, [v](T cur) { return cast<T>(num(cur) + num(v)); });
}
template <class T> TC_DEVICE T atomic_max(T* addr, T v) {
  using atomic_detail::num;
  return atomic_detail::update(addr, [v](T cur) {
    return (num(cur) > num(v) || num(cur) != num(cur)) ? cur : v;
  });
}
template <class T> TC_DEVICE T atomic_min(T* addr, T v) {
  using atomic_detail::num;
  return atomic_detail::update(addr, [v](T cur) {
    return (num(cur) < num(v) || num(cur) != num(cur)) ? cur : v;
  });
}

TC_DEVICE float atomic_add(float* addr, float v) { return atomicAdd(addr, v); }
TC_DEVICE double atomic_add(double* addr, double v) { return atomicAdd(addr, v); }
TC_DEVICE int atomic_add(int* addr, int v) { return atomicAdd(addr, v); }
TC_DEVICE unsigned atomic_add(unsigned* addr, unsigned v) { return atomicAdd(addr, v); }
TC_DEVICE unsigned long long atomic_add(unsigned long long* addr, unsigned long long v) {
  return atomicAdd(addr, v);
}
TC_DEVICE long long atomic_add(long long* addr, long long v) {  // two's complement: same bits
  return static_cast<long long>(atomicAdd(reinterpret_cast<unsigned long long*>(addr),
                                          static_cast<unsigned long long>(v)));
}
TC_DEVICE __half atomic_add(__half* addr, __half v) { return atomicAdd(addr, v); }
TC_DEVICE __half2 atomic_add(__half2* addr, __half2 v) { return atomicAdd(addr, v); }
#ifndef TC_NO_BF16
TC_DEVICE __nv_bfloat16 atomic_add(__nv_bfloat16* addr, __nv_bfloat16 v) {
  return atomicAdd(addr, v);
}
TC_DEVICE __nv_bfloat162 atomic_add(__nv_bfloat162* addr, __nv_bfloat162 v) {
  return atomicAdd(addr, v);
}
#endif

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
TC_DEVICE unsigned atomic_max(unsigned* addr, unsigned v) { return atomicMax(addr, v); }
TC_DEVICE unsigned atomic_min(unsigned* addr, unsigned v) { return atomicMin(addr, v); }
TC_DEVICE long long atomic_max(long long* addr, long long v) { return atomicMax(addr, v); }
TC_DEVICE long long atomic_min(long long* addr, long long v) { return atomicMin(addr, v); }
TC_DEVICE unsigned long long atomic_max(unsigned long long* addr, unsigned long long v) {
  return atomicMax(addr, v);
}
TC_DEVICE unsigned long long atomic_min(unsigned long long* addr, unsigned long long v) {
  return atomicMin(addr, v);
}

// Ordered atomics at GPU scope on global memory (a block-level T.atomic_* with memory_order
// acquire, release or acq_rel), one `atom.<sem>.gpu.global` each, for the operations and types
// PTX's atom has (codegen/block_cuda/atomics.py ORDERED names them; the others keep fences
// around the relaxed form). Thread 0 issues it after a barrier: a release is cumulative, so the
// block's accesses before the barrier are ordered before it; after an acquire, the barrier that
// follows orders the block's later accesses after it.
#define TC_ATOM_ORDERED(OP, SEM, T, PTX_T, REG)                                      \
  TC_DEVICE T atomic_##OP##_##SEM(T* addr, T v) {                                    \
    T old;                                                                            \
    asm volatile("atom." #SEM ".gpu.global." #OP "." PTX_T " %0, [%1], %2;\n"        \
                 : "=" REG(old) : "l"(addr), REG(v) : "memory");                     \
    return old;                                                                       \
  }
#define TC_ATOM_ORDERED_SEMS(OP, T, PTX_T, REG) \
  TC_ATOM_ORDERED(OP, acquire, T, PTX_T, REG)   \
  TC_ATOM_ORDERED(OP, release, T, PTX_T, REG)   \
  TC_ATOM_ORDERED(OP, acq_rel, T, PTX_T, REG)
TC_ATOM_ORDERED_SEMS(add, int, "s32", "r")
TC_ATOM_ORDERED_SEMS(add, unsigned, "u32", "r")
TC_ATOM_ORDERED_SEMS(add, unsigned long long, "u64", "l")
TC_ATOM_ORDERED_SEMS(add, float, "f32", "f")
TC_ATOM_ORDERED_SEMS(add, double, "f64", "d")
TC_ATOM_ORDERED_SEMS(max, int, "s32", "r")
TC_ATOM_ORDERED_SEMS(max, unsigned, "u32", "r")
TC_ATOM_ORDERED_SEMS(max, long long, "s64", "l")
TC_ATOM_ORDERED_SEMS(max, unsigned long long, "u64", "l")
TC_ATOM_ORDERED_SEMS(min, int, "s32", "r")
TC_ATOM_ORDERED_SEMS(min, unsigned, "u32", "r")
TC_ATOM_ORDERED_SEMS(min, long long, "s64", "l")
TC_ATOM_ORDERED_SEMS(min, unsigned long long, "u64", "l")
#define TC_ATOM_ADD_S64(SEM)                                                          \
  TC_DEVICE long long atomic_add_##SEM(long long* addr, long long v) {               \
    return static_cast<long long>(atomic_add_##SEM(                                  \
        reinterpret_cast<unsigned long long*>(addr), static_cast<unsigned long long>(v))); \
  }
TC_ATOM_ADD_S64(acquire)  // (PTX has no atom.add.s64: two's complement, the u64 add's bits)
TC_ATOM_ADD_S64(release)
TC_ATOM_ADD_S64(acq_rel)
#undef TC_ATOM_ADD_S64
#undef TC_ATOM_ORDERED_SEMS
#undef TC_ATOM_ORDERED

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

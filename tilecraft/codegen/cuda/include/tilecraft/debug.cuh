// T.print / T.device_assert helpers. `tc::dbg(x)` turns a value into a printf argument: a double
// for every float type ("%g"), a 64-bit integer for integers ("%lld" / "%llu"), an int for bool
// ("%d"); the emitter (codegen/cuda/emit_debug.py) picks the format from the IR dtype.
#pragma once
#include "tilecraft/common.cuh"

namespace tc {

TC_DEVICE double dbg(float x) { return x; }
TC_DEVICE double dbg(double x) { return x; }
TC_DEVICE double dbg(__half x) { return __half2float(x); }
#ifndef TC_NO_BF16
TC_DEVICE double dbg(__nv_bfloat16 x) { return __bfloat162float(x); }
#endif
#ifndef TC_NO_FP8
TC_DEVICE double dbg(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
TC_DEVICE double dbg(__nv_fp8_e5m2 x) { return static_cast<float>(x); }
#endif
TC_DEVICE int dbg(bool x) { return x ? 1 : 0; }
TC_DEVICE long long dbg(signed char x) { return x; }
TC_DEVICE long long dbg(short x) { return x; }
TC_DEVICE long long dbg(int x) { return x; }
TC_DEVICE long long dbg(long long x) { return x; }
TC_DEVICE unsigned long long dbg(unsigned char x) { return x; }
TC_DEVICE unsigned long long dbg(unsigned short x) { return x; }
TC_DEVICE unsigned long long dbg(unsigned int x) { return x; }
TC_DEVICE unsigned long long dbg(unsigned long long x) { return x; }

}  // namespace tc

"""The CUDA emitters, found by node class (docs/adding_an_op.md)."""

from tilecraft.ir import (
    AnnotateLayout,
    Atomic,
    Copy,
    CumSum,
    DeviceAssert,
    Fill,
    Gemm,
    ParallelLoop,
    Print,
    Reduce,
    UseSwizzle,
)

from .emit_copy import emit_copy
from .emit_debug import emit_device_assert, emit_print
from .emit_gemm import emit_gemm
from .emit_misc import emit_atomic, emit_fill, emit_nothing
from .emit_parallel import emit_parallel
from .emit_reduce import emit_reduce
from .emit_scan import emit_cumsum

EMITTERS = {
    Copy: emit_copy, Gemm: emit_gemm, Reduce: emit_reduce, Fill: emit_fill, Atomic: emit_atomic,
    ParallelLoop: emit_parallel, UseSwizzle: emit_nothing, AnnotateLayout: emit_nothing,
    CumSum: emit_cumsum, Print: emit_print, DeviceAssert: emit_device_assert,
}

"""Constants folded by the front end follow the language's integer semantics: wrapping, and
shift counts outside [0, bits) giving 0 (or the sign for >>), never a Python exception."""

import numpy as np

import tilecraft.language as T
from tilecraft import interp


def folded_shifts():
    @T.prim_func
    def k(X: T.Tensor((4,), "int8"), Y: T.Tensor((4,), "int8")):
        with T.Kernel(1, threads=32) as bx:
            Y[0] = (X[0] * 0) >> -1
            Y[1] = (X[0] * 0 + 1) << 9
            Y[2] = (X[0] * 0 - 4) >> 8
            Y[3] = (X[0] * 0 + 1) << 7

    return k


def test_folded_shift_counts_outside_the_type_give_zero_or_the_sign():
    y = np.full(4, 7, np.int8)
    interp.run(folded_shifts(), [np.ones(4, np.int8), y])
    assert y.tolist() == [0, 0, -1, -128]

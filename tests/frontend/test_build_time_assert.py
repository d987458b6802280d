"""An `assert` on Python values inside a kernel is checked when the kernel is built; a failing
one is TC120 at the assert's line with the user's message (not a bare AssertionError)."""

import inspect

import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError


def tiled_copy(block):
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            assert 128 % block == 0, f"block {block} does not divide 128"  # ERR
            for i in T.Parallel(128):
                B[i] = A[i]

    return k


def test_a_failing_build_time_assert_is_tc120_at_its_line():
    with pytest.raises(TilecraftError) as err:
        tilecraft.compile(tiled_copy(48), target="interp")
    lines, first = inspect.getsourcelines(tiled_copy)
    line = first + next(i for i, ln in enumerate(lines) if "# ERR" in ln)
    assert err.value.code == "TC120" and err.value.line == line
    assert "block 48 does not divide 128" in str(err.value)


def test_a_passing_build_time_assert_builds_the_kernel():
    tilecraft.compile(tiled_copy(32), target="interp")

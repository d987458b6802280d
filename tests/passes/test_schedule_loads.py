"""schedule_loads: one-iteration T.Pipelined loops become their bodies, and a global -> shared
copy moves up beside an earlier one only past statements it cannot affect or be affected by.
The rewritten kernel runs on the interpreter (with the planned shared-memory arena) and gives
the original's outputs bit for bit."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft.ir import Copy, For
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.targets import H100_SXM

from .arena_interp import run_both

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def _copies(func) -> list[str]:
    """The sources of the kernel's copies into shared memory, in program order."""
    k = lower(func, H100_SXM).kernel
    return [s.src.buffer.name for s in walk(k) if isinstance(s, Copy)
            and s.dst.buffer.scope == "shared"]


def _same_outputs(func) -> None:
    plain, lowered = run_both(func)
    for x, y in zip(plain, lowered):
        np.testing.assert_array_equal(x, y)


def _two_loads(between: str):
    """B's copy follows A's after a statement of kind `between`."""

    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
          C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            a_s = T.alloc_shared((64,), "float32")
            b_s = T.alloc_shared((64,), "float32")
            f = T.alloc_fragment((64,), "float32")
            T.copy(A[0:64], a_s)
            if between == "reads a_s":
                for i in T.Parallel(64):
                    f[i] = a_s[i] * 2
            elif between == "reads b_s":
                for i in T.Parallel(64):
                    f[i] = b_s[i] * 2
            elif between == "stores to global":
                for i in T.Parallel(64):
                    f[i] = a_s[i] * 2
                T.copy(f, C[0:64])
            T.copy(B[0:64], b_s)
            for i in T.Parallel(64):
                f[i] = f[i] + b_s[i] + a_s[i]
            T.copy(f, C[0:64])

    return k


def test_a_load_moves_up_beside_an_earlier_load_past_independent_work():
    func = _two_loads("reads a_s")
    k = lower(func, H100_SXM).kernel
    order = [type(s).__name__ for s in k.body.stmts if not type(s).__name__ == "Allocate"]
    assert order[:3] == ["Copy", "Copy", "ParallelLoop"], order
    _same_outputs(func)


@pytest.mark.parametrize("between", ["reads b_s", "stores to global"])
def test_a_load_stays_below_what_it_could_change_or_what_could_alias_its_source(between):
    func = _two_loads(between)
    k = lower(func, H100_SXM).kernel
    order = [type(s).__name__ for s in k.body.stmts if not type(s).__name__ == "Allocate"]
    assert order[:2] == ["Copy", "ParallelLoop"], order
    _same_outputs(func)


@T.prim_func
def load_uses_a_let(A: T.Tensor((128,), "float32"), B: T.Tensor((2, 64), "float32"),
                    C: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        a_s = T.alloc_shared((64,), "float32")
        b_s = T.alloc_shared((64,), "float32")
        f = T.alloc_fragment((64,), "float32")
        T.copy(A[0:64], a_s)
        row = bx + 1
        T.copy(B[row, 0:64], b_s)
        for i in T.Parallel(64):
            f[i] = a_s[i] + b_s[i]
        T.copy(f, C[0:64])


def test_a_load_stays_below_the_let_its_index_reads():
    k = lower(load_uses_a_let, H100_SXM).kernel
    order = [type(s).__name__ for s in k.body.stmts if not type(s).__name__ == "Allocate"]
    assert order[:3] == ["Copy", "LetStmt", "Copy"], order
    _same_outputs(load_uses_a_let)


@T.prim_func
def one_and_two_iterations(A: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        a_s = T.alloc_shared((64,), "float32")
        b_s = T.alloc_shared((64,), "float32")
        f = T.alloc_fragment((64,), "float32")
        for c in T.Pipelined(1, num_stages=2):
            T.copy(A[c * 64 + 64:c * 64 + 128], a_s)
            for i in T.Parallel(64):
                f[i] = a_s[i]
            T.copy(f, C[c * 64:c * 64 + 64])
        for c in T.Pipelined(2, num_stages=2):
            T.copy(A[c * 64:c * 64 + 64], b_s)
            for i in T.Parallel(64):
                f[i] = f[i] + b_s[i]
            T.copy(f, C[c * 64:c * 64 + 64])


def test_a_one_iteration_pipelined_loop_becomes_its_body():
    state = lower(one_and_two_iterations, H100_SXM)
    loops = [s for s in walk(state.kernel) if isinstance(s, For)]
    assert len(loops) == 1 and loops[0].kind == "pipelined" and loops[0] in state.pipelines
    first = next(s for s in walk(state.kernel) if isinstance(s, Copy))
    assert "c" not in str(first.src)  # the loop variable is replaced by its start
    _same_outputs(one_and_two_iterations)


def test_rmsnorm_with_whole_rows_loads_gamma_beside_x():
    from rmsnorm_silu import rmsnorm_silu

    func = rmsnorm_silu(8, 256).func
    assert _copies(func) == ["X", "gamma", "X"]  # the second X copy is skipped (copy_reuse)
    _same_outputs(func)


def test_rmsnorm_in_chunks_keeps_its_pipelines():
    from rmsnorm_silu import rmsnorm_silu

    func = rmsnorm_silu(8, 256, BLOCK_M=4, BLOCK_C=64).func
    state = lower(func, H100_SXM)
    loops = [s for s in walk(state.kernel) if isinstance(s, For) and s.kind == "pipelined"]
    assert len(loops) == 2 and loops[1] in state.pipelines  # (gamma's copy is staged)
    _same_outputs(func)

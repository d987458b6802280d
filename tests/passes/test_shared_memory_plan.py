"""The shared-memory plan (block/smem_plan.py, the `plan_arena` pass: state.arena): tensors
whose lifetimes do not overlap share bytes, tensors live at once never do, the stages of a
pipelined tile share with nothing, reuse waits for a barrier (insert_barriers orders the tensors
of a group), and TC503 still fires when even the shared arena is too big.

Value liveness is checked end to end by running each kernel on the interpreter and its lowered
program on the block VM with every shared tensor a view into the planned arena (arena_interp.py):
a tensor that took the bytes of one still live clobbers it and the outputs differ.
"""

import importlib.util
import inspect
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft.block import AllocateShared, Instruction, SharedTensor, Synchronize
from tilecraft.block.smem_plan import _Lifetimes, may_share
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import SeqStmt
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.targets import H100_SXM

from .arena_interp import run_both
from .random_programs import random_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import CONFIGS, make

# FlashMLA decode as DeepSeek runs it: 128 query heads on one latent KV head, dim 512 + 64 rope.
FLASH_MLA_PROD = ("flash_mla_prod", "flash_mla", "flash_mla", (4, 128, 1, 8192, 512, 64),
                  {"block_N": 64, "block_H": 64, "threads": 256})
SM90_LIMIT = H100_SXM.max_shared_memory_per_block  # 227 KB on sm_90a


def _tensors(state) -> dict[str, SharedTensor]:
    """The program's shared tensors (allocated ones: a pipelined tile's are its stages)."""
    return {s.out.name: s.out for s in walk(state.block_program.body)
            if isinstance(s, AllocateShared)}


def _range(state, name: str) -> tuple[int, int]:
    t = _tensors(state)[name]
    start = state.arena.offsets[t.buffer]
    return start, start + t.layout.cosize * t.dtype.bits // 8


def _shares(state, a: str, b: str) -> bool:
    (a0, a1), (b0, b1) = _range(state, a), _range(state, b)
    return a0 < b1 and b0 < a1


def _assert_plan_is_consistent(state) -> None:
    """Tensors live at once never overlap, stages overlap only tensors used before or after
    their pipeline, tensors that overlap have keys that meet (so insert_barriers orders them);
    every tensor lies in the arena, aligned."""
    lives = _Lifetimes()
    lives.visit(state.block_program.body)
    roots = {r.tensor.name: r for r in lives.roots.values()}
    groups = state.arena.groups
    for a, b in combinations(_tensors(state), 2):
        if _shares(state, a, b):
            ra, rb = roots[a], roots[b]
            (a0, a1), (b0, b1) = ra.span(), rb.span()
            assert (a1 < b0 or b1 < a0) and may_share(ra, rb), (a, b)
            ta, tb = _tensors(state)[a].buffer, _tensors(state)[b].buffer
            assert groups[ta].meets(groups[tb]), (a, b)
    for name, t in _tensors(state).items():
        start, end = _range(state, name)
        assert start % (1024 if t.layout.swizzle is not None else 128) == 0
        assert end <= state.arena.size


def _names(s) -> set[str]:
    """The shared tensors statement `s` (and what it contains) reads or writes."""
    out = set()
    for x in walk(s):
        if isinstance(x, Instruction) and not isinstance(x, AllocateShared):
            out |= {t.name for t in (*x.reads(), *x.writes()) if isinstance(t, SharedTensor)}
    return out


def _barrier_between(state, first: str, then: str) -> bool:
    """In the kernel's top-level statements (after insert_barriers), a barrier on every path
    between the last access of `first` and the first access of `then`."""
    body = state.block_program.body
    top = []
    stack = [body]
    while stack:  # flatten sequences, not loops or branches
        s = stack.pop(0)
        if isinstance(s, SeqStmt):
            stack = list(s.stmts) + stack
        else:
            top.append(s)
    last = max(i for i, s in enumerate(top) if first in _names(s))
    nxt = min(i for i, s in enumerate(top) if then in _names(s))
    return any(isinstance(s, Synchronize) for s in top[last + 1:nxt])


def _assert_same_outputs(func) -> None:
    plain, arena = run_both(func)
    for x, y in zip(plain, arena):
        assert np.array_equal(x, y, equal_nan=True)


# ---- reuse -----------------------------------------------------------------------------------
def _two_phases():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(A_s, acc)
            T.copy(acc, C[0, 0])
            T.copy(B[0, 0], B_s)  # A_s is dead; a barrier comes before this write
            T.copy(B_s, acc)
            T.copy(acc, C[64, 0])
    return k


def test_buffers_with_disjoint_lifetimes_share_offsets():
    st = lower(_two_phases(), H100_SXM)
    assert _range(st, "A_s")[0] == _range(st, "B_s")[0] == 0
    assert st.arena.size == 64 * 64 * 2
    assert _barrier_between(st, "A_s", "B_s")
    _assert_plan_is_consistent(st)
    _assert_same_outputs(_two_phases())


def test_a_value_read_in_a_later_iteration_keeps_its_bytes():
    @T.prim_func
    def k(X: T.Tensor((32, 256), "float32"), Y: T.Tensor((64, 256), "float32")):
        with T.Kernel(1, threads=128):
            S0 = T.alloc_shared((4, 256), "float32")
            S1 = T.alloc_shared((4, 256), "float32")
            F = T.alloc_fragment((4, 256), "float32")
            T.copy(X[0, 0], S0)
            for i in T.serial(3):
                T.copy(S0, F)  # S0 was written before the loop: live for all of it
                T.copy(F, Y[i * 4, 0])
                T.copy(X[i * 4, 0], S1)
                T.copy(S1, F)
                T.copy(F, Y[16 + i * 4, 0])
    st = lower(k, H100_SXM)
    assert not _shares(st, "S0", "S1")
    _assert_plan_is_consistent(st)
    _assert_same_outputs(k)


def test_a_partial_or_conditional_overwrite_does_not_end_a_lifetime():
    @T.prim_func
    def k(X: T.Tensor((32, 256), "float32"), Y: T.Tensor((64, 256), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S0 = T.alloc_shared((4, 256), "float32")
            S1 = T.alloc_shared((4, 256), "float32")
            S2 = T.alloc_shared((4, 256), "float32")
            S3 = T.alloc_shared((4, 256), "float32")
            F = T.alloc_fragment((4, 256), "float32")
            T.copy(X[0, 0], S0)
            T.copy(X[4, 0], S2)
            for i in T.serial(2):
                T.copy(X[i * 4, 0], S0[0:2, 0:256])  # rows 2, 3 go around the loop
                if bx == 0:
                    T.copy(X[i * 4, 0], S2)  # block 1 keeps S2 from before the loop
                T.copy(S0, F)
                T.copy(F, Y[bx * 32 + i * 4, 0])
                T.copy(S2, F)
                T.copy(F, Y[bx * 32 + 8 + i * 4, 0])
                T.copy(X[16, 0], S1)
                T.copy(S1, F)
                T.copy(X[20, 0], S3)
                T.copy(S3, F)
                T.copy(F, Y[bx * 32 + 16 + i * 4, 0])
    st = lower(k, H100_SXM)
    for dead_later in ("S1", "S3"):
        assert not _shares(st, "S0", dead_later) and not _shares(st, "S2", dead_later)
    _assert_plan_is_consistent(st)
    _assert_same_outputs(k)


# ---- barriers --------------------------------------------------------------------------------
def test_pipelined_stages_share_only_with_tiles_used_after_the_pipeline_behind_a_barrier():
    @T.prim_func
    def k(A: T.Tensor((128, 512), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128):
            Pre_s = T.alloc_shared((128, 64), "float16")
            A_s = T.alloc_shared((128, 64), "float16")
            Post_s = T.alloc_shared((128, 64), "float32")
            acc = T.alloc_fragment((128, 64), "float32")
            tile = T.alloc_fragment((128, 64), "float32")
            T.copy(A[0, 0], Pre_s)
            T.copy(Pre_s, acc)  # a read with no barrier after it, then the loop's prologue
            for ko in T.Pipelined(8, num_stages=3):
                T.copy(A[0, ko * 64], A_s)
                T.copy(A_s, tile)
                for i, j in T.Parallel(128, 64):
                    acc[i, j] += tile[i, j]
            T.copy(acc, Post_s)  # after the loop's drain barrier
            T.copy(Post_s, C[0, 0])
    st = lower(k, H100_SXM)
    assert "A_s" not in _tensors(st)
    start, end = _range(st, "A_s_stages")
    assert end - start == 3 * 128 * 64 * 2
    # (the loop's slices are ordered by pipeline_copies; its TMA copies do not write bytes the
    # generic proxy used before; once the loop is done, its last copy has landed)
    assert not _shares(st, "A_s_stages", "Pre_s")
    assert _shares(st, "A_s_stages", "Post_s") and _barrier_between(st, "A_s", "Post_s")
    _assert_plan_is_consistent(st)
    _assert_same_outputs(k)


def test_a_barrier_in_one_branch_only_does_not_allow_reuse():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            E_s = T.alloc_shared((64, 64), "float16")
            X_s = T.alloc_shared((64, 64), "float16")
            L_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], E_s)
            T.copy(E_s, acc)  # the last read of E_s
            if bx == 0:
                T.copy(A[0, 0], X_s)  # a barrier on this path only
                T.copy(X_s, acc)
            T.copy(A[0, 0], L_s)  # the other path reaches this write with no barrier
            T.copy(L_s, acc)
            T.copy(acc, C[bx * 64, 0])
    st = lower(k, H100_SXM)
    assert not _shares(st, "E_s", "L_s") or _barrier_between(st, "E_s", "L_s")
    _assert_plan_is_consistent(st)
    _assert_same_outputs(k)


# ---- whole programs ---------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", CONFIGS + [FLASH_MLA_PROD], ids=[c[0] for c in CONFIGS] + ["prod"])
def test_example_plans_never_overlap_live_buffers(cfg):
    kernel = make(cfg)
    _assert_plan_is_consistent(lower(kernel.func, H100_SXM))
    if cfg is FLASH_MLA_PROD:  # the same tiles over a short cache, for the interpreter
        args = (1, 64, 1, 200, 512, 64)
        kernel = make(cfg[:3] + (args,) + cfg[4:])
    _assert_same_outputs(kernel.func)


def test_random_programs_never_overlap_live_buffers(tmp_path):
    reused = 0
    for seed in range(120):
        path = tmp_path / f"prog_{seed}.py"
        path.write_text(random_program(seed))
        spec = importlib.util.spec_from_file_location(f"smem_prog_{seed}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        func = module.make()
        st = lower(func, H100_SXM)
        _assert_plan_is_consistent(st)
        _assert_same_outputs(func)
        reused += bool(st.arena.groups)
    assert reused >= 20  # the programs do exercise reuse


# ---- FlashMLA at production size, and the limit ------------------------------------------------
def test_production_flash_mla_fits_sm90a_after_reuse():
    """In one role (warp-specialized, the stages stay alive across both roles and O_shared
    takes Q_shared's bytes instead: it fits too, and compiles)."""
    from tilecraft.options import CompileOptions

    one_role = CompileOptions(H100_SXM).replace(warp_specialize=False)
    st = lower(make(FLASH_MLA_PROD).func, one_role)
    # KV 2 x 64 KB + Q 64 KB + K_pe 2 x 8 KB + S 8 KB + Q_pe 8 KB + the TMA stages' mbarriers;
    # O_shared takes KV_shared's bytes after the loop (294928 B without reuse)
    assert _shares(st, "KV_shared_stages", "O_shared")
    assert st.arena.size == 229392
    split = lower(make(FLASH_MLA_PROD).func, H100_SXM)
    assert _shares(split, "Q_shared", "O_shared") and split.arena.size <= 232448
    pytest.importorskip("cuda.bindings.nvrtc")  # as tests/codegen: skipped without NVRTC
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.runtime import compile_cuda

    for opts, state in ((one_role, st), (CompileOptions(H100_SXM), split)):
        gen = generate_cuda(make(FLASH_MLA_PROD).func, options=opts)
        compiled = compile_cuda(gen.source, "sm_90a", name=gen.name)
        # the reductions' scratch takes S_shared's bytes (dead until its store in each
        # iteration)
        assert compiled.cubin and gen.launch.smem == -(-state.arena.size // 128) * 128
        assert compiled.resources.spill_stores == 0


def test_too_much_shared_memory_even_after_reuse_is_tc503():
    @T.prim_func
    def k(A: T.Tensor((256, 256), "float16"), C: T.Tensor((256, 256), "float32")):
        with T.Kernel(1, threads=128):  # TC503
            A_s = T.alloc_shared((256, 256), "float16")
            B_s = T.alloc_shared((256, 256), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(A[0, 0], B_s)
            T.gemm(A_s[0:128, 0:128], B_s[0:128, 0:128], acc)
            T.copy(acc, C[0, 0])

    from tilecraft.codegen.cuda.build import generate_cuda

    with pytest.raises(TilecraftError) as e:
        generate_cuda(k, "sm_90a")
    assert e.value.code == "TC503" and e.value.fields["need"] >= 2 * 256 * 256 * 2
    lines, first = inspect.getsourcelines(test_too_much_shared_memory_even_after_reuse_is_tc503)
    assert e.value.line == first + next(i for i, ln in enumerate(lines) if "# TC503" in ln)


def test_reuse_makes_room_for_big_tiles_used_one_after_the_other():
    @T.prim_func
    def k(A: T.Tensor((256, 256), "float16"), C: T.Tensor((256, 256), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((256, 256), "float16")
            B_s = T.alloc_shared((256, 256), "float16")
            T.copy(A[0, 0], A_s)
            T.copy(A_s, C[0, 0])
            T.copy(A[0, 0], B_s)
            T.copy(B_s, C[0, 0])

    assert lower(k, H100_SXM).arena.size == 256 * 256 * 2


def test_reuse_inside_a_while_loop_needs_a_barrier_around_the_back_edge():
    @T.prim_func
    def k(X: T.Tensor((32, 256), "float32"), Y: T.Tensor((64, 256), "float32")):
        with T.Kernel(1, threads=128):
            S0 = T.alloc_shared((4, 256), "float32")
            S1 = T.alloc_shared((4, 256), "float32")
            F = T.alloc_fragment((4, 256), "float32")
            n = T.alloc_var("int32", init=0)
            while n < 3:
                T.copy(X[n * 4, 0], S0)  # each S0, S1 is rewritten before it is read
                T.copy(S0, F)
                T.copy(X[8 + n * 4, 0], S1)
                T.copy(S1, F)  # no barrier before the next iteration's write of S0
                T.copy(F, Y[n * 4, 0])
                n = n + 1
    st = lower(k, H100_SXM)
    assert not _shares(st, "S0", "S1")
    _assert_plan_is_consistent(st)
    _assert_same_outputs(k)

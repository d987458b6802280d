"""Pass pipeline order, layout inference results and diagnostics, written as DSL programs."""

import pytest

import tilecraft.language as T
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import local, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16
from tilecraft.passes import PASSES, lower
from tilecraft.passes.pipeline import Pass, check_order
from tilecraft.targets import H100_SXM


def test_pass_order_is_checked():
    check_order(PASSES)
    bad = (PASSES[1], PASSES[0])
    with pytest.raises(RuntimeError, match="requires"):
        check_order(bad)
    assert all(isinstance(p, Pass) for p in PASSES)


def _gemm_chain(policy2):
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            acc_h = T.alloc_fragment((128, 64), "float16")
            out = T.alloc_fragment((128, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, acc_h)
            T.clear(out)
            T.gemm(acc_h, B_s, out, policy=policy2)
            T.copy(out, C[0, 0])
    return k


def test_accumulator_feeds_next_gemm_from_registers():
    st = lower(_gemm_chain(T.GemmWarpPolicy.FullRow), H100_SXM)
    layouts = {b.name: lay for b, lay in st.layouts.items()}
    expect_c = spatial(4, 1) * local(2, 8) * MMA_M16N8K16_F16.c
    assert layouts["acc"] == expect_c
    assert layouts["acc_h"] == expect_c  # the mma A layout equals the C layout here
    assert layouts["out"] == expect_c


def test_register_operand_with_split_warps_is_a_diagnostic():
    with pytest.raises(TilecraftError) as e:
        lower(_gemm_chain(T.GemmWarpPolicy.FullCol), H100_SXM)
    assert e.value.code in ("TC501", "TC502")
    assert e.value.line is not None


def test_reduce_output_is_replicated_across_the_row_threads():
    @T.prim_func
    def k(X: T.Tensor((64, 128), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((64, 128), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(X[0, 0], x)
            T.reduce_max(x, m, dim=1)
            T.copy(m, Y[0])
    st = lower(k, H100_SXM)
    lay = {b.name: v for b, v in st.layouts.items()}
    assert lay["m"] == lay["x"].reduce(1, keepdim=False)
    assert lay["m"].is_replicated


def test_pipelined_copies_get_stages_and_an_arena_over_the_limit_is_tc503():
    @T.prim_func
    def k(A: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            for ko in T.Pipelined(16, num_stages=3):
                T.copy(A[0, ko * 64], A_s)
                T.copy(A_s, acc)
    st = lower(k, H100_SXM)
    (plan,) = st.pipelines.values()
    assert [b.name for b in plan.buffers] == ["A_s"] and plan.num_stages == 3
    # the three stages of A_s and their three TMA mbarriers (block/smem_plan.py)
    assert st.arena.size == 3 * 128 * 64 * 2 + 32

    @T.prim_func
    def big(A: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((512, 512), "float16")
            T.copy(A[0, 0], A_s)
    from tilecraft.codegen.cuda.build import generate_cuda

    with pytest.raises(TilecraftError) as e:
        generate_cuda(big, "sm_90a")
    assert e.value.code == "TC503"


def test_facts_are_kept_per_statement_not_per_value():
    """Two equal T.Parallel loops are two places in the program: each has its own layout entry,
    and a statement equal to a keyed one, but another object, is not a key."""
    import dataclasses

    from tilecraft.ir import ParallelLoop
    from tilecraft.ir.visitor import walk
    from tilecraft.passes.context import StmtMap

    @T.prim_func
    def twice(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                A[i] = A[i] + 1.0
            for i in T.Parallel(128):
                A[i] = A[i] + 1.0

    st = lower(twice, H100_SXM)
    loops = [s for s in walk(st.kernel.body) if isinstance(s, ParallelLoop)]
    assert len(loops) == 2 and len(st.loop_layouts) == 2
    assert all(loop in st.loop_layouts for loop in loops)
    copy = dataclasses.replace(loops[0])
    assert copy not in st.loop_layouts and st.loop_layouts.get(copy) is None
    m = StmtMap()
    m[loops[0]] = 1
    assert m[loops[0]] == 1 and loops[1] not in m

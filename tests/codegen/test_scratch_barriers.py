"""The barrier before a cross-warp reduction writes its partials (codegen/block_cuda/compute.py
`before_scratch`): printed only where a thread may still read the staging area. The partials go
to two scratch areas after the arena, used in turn, so reductions back to back need none; dead
bytes of the arena hold them only where the two areas would cost a block an SM
(block/smem_plan.py `plan_program_arena`). The GPU tests run each form against numpy."""

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.block.smem_plan import plan_program_arena
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.passes import lower
from tilecraft.targets import H100_SXM

LEADING = "may still be read"
ROWS, N = 4, 2048


@tilecraft.jit
def reductions(loop: bool = False, twice: bool = False):
    """Row max and sum of X (256 threads a row: partials across 8 warps); `loop`: both twice, in
    a loop; `twice`: the sum once more after them."""

    @T.prim_func
    def k(X: T.Tensor((ROWS, N), "float32"), Y: T.Tensor((ROWS, 3), "float32")):
        with T.Kernel(ROWS, threads=256) as bx:
            xs = T.alloc_shared((1, N), "float32")
            x = T.alloc_fragment((1, N), "float32")
            m = T.alloc_fragment((1,), "float32")
            s = T.alloc_fragment((1,), "float32")
            t = T.alloc_fragment((1,), "float32")
            T.fill(m, -1e30)
            T.fill(s, 0.0)
            T.fill(t, 0.0)
            T.copy(X[bx, 0], xs)
            T.copy(xs, x)
            if loop:
                for _ in T.serial(2):
                    T.reduce_max(x, m, dim=1, clear=False)
                    T.reduce_sum(x, s, dim=1, clear=False)
            else:
                T.reduce_max(x, m, dim=1, clear=False)
                T.reduce_sum(x, s, dim=1, clear=False)
            if twice:
                T.reduce_sum(x, t, dim=1, clear=False)
            for i in T.Parallel(1):
                Y[bx, 0] = m[i]
                Y[bx, 1] = s[i]
                Y[bx, 2] = t[i]

    return k


def _source(**kw) -> str:
    return generate_cuda(reductions(**kw).func, "sm_90a").source


def _areas(src: str) -> list[str]:
    """The offsets the reductions' partials are written at, in order."""
    import re

    return re.findall(r"float\* scratch = reinterpret_cast<float\*>\(tc_smem \+ (\d+)\);", src)


def test_reductions_back_to_back_alternate_areas_without_a_leading_barrier():
    src = _source(twice=True)
    assert src.count(LEADING) == 0
    a, b, c = _areas(src)
    assert a == c != b  # the second area, then the first again (its reads are behind a barrier)
    assert int(b) - int(a) == 256 * 4  # one float a thread


def test_a_reduction_at_the_top_of_a_loop_body_keeps_its_barrier():
    src = _source(loop=True, twice=True)
    body = src[src.index("for (int _"):]
    first, second, after = (body.index(f"// {r}(x, out={o}") for r, o in
                            (("reduce_max", "m"), ("reduce_sum", "s"), ("reduce_sum", "t")))
    assert LEADING in body[first:second] and LEADING not in body[second:]
    a, b, c = _areas(body)  # (after the loop, which runs: the area its end left unread)
    assert a == c != b


def test_partials_stay_in_dead_bytes_where_two_areas_would_cost_a_block():
    func = reductions().func
    st = lower(func, H100_SXM)
    program = st.block_program
    assert not st.arena.staged and st.arena.trailing == 256 * 4
    arena = -(-st.arena.size // 128) * 128  # xs (8 KB), dead at the reductions
    tight = H100_SXM.replace(shared_memory_per_sm=5 * (arena + 1024))  # five blocks, just
    plan = plan_program_arena(program.body, program.num_threads, tight)
    assert len(plan.staged) == 2 and plan.size == st.arena.size
    roomy = H100_SXM.replace(shared_memory_per_sm=8 * (arena + 1024 + 2 * 1024))  # (threads)
    assert not plan_program_arena(program.body, program.num_threads, roomy).staged
    assert len(plan_program_arena(program.body, program.num_threads, None).staged) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"twice": True}, {"loop": True}, {"loop": True,
                                                                     "twice": True}])
def test_reductions_on_the_gpu(kw):
    x = torch.randn(ROWS, N, device="cuda")
    y = torch.full((ROWS, 3), float("nan"), device="cuda")
    reductions(**kw)(x, y)
    xn = x.double().cpu().numpy()
    reps = 2 if kw.get("loop") else 1
    want = np.stack([xn.max(1), reps * xn.sum(1), xn.sum(1) * bool(kw.get("twice"))], 1)
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-5, atol=1e-4)


def test_a_producer_role_that_stages_through_the_scratch_area_is_refused():
    """The consumer role runs at the same time and uses the same two areas: a producer's
    cross-warp reduction is TC603 (the warp-specialize pass makes producers that only copy)."""
    import dataclasses

    from tilecraft.block.compute import ReduceRegister
    from tilecraft.block.roles import WarpRoles
    from tilecraft.codegen.block_cuda.printer import print_cuda
    from tilecraft.diagnostics import TilecraftError
    from tilecraft.ir import SeqStmt
    from tilecraft.options import CompileOptions
    from tilecraft.passes.lower_tile_ops import lowered_program

    program = lowered_program(lower(reductions().func, CompileOptions.for_arch("sm_90a")))
    top = list(program.body.stmts)
    first = next(i for i, s in enumerate(top) if isinstance(s, ReduceRegister))
    roles = WarpRoles.create(top[first:], [], consumer_threads=256, producer_threads=256,
                             producer_regs=64)
    split = dataclasses.replace(program, body=SeqStmt.create(top[:first] + [roles]))
    with pytest.raises(TilecraftError) as e:
        print_cuda(split, "sm_90a")
    assert e.value.code == "TC603" and "scratch area" in str(e.value)
    print_cuda(program, "sm_90a")  # (unsplit: printed)

"""lower_tile_ops: the block program the VM runs computes, bit for bit, what the Tile IR
interpreter computes (every example, random programs, the less common ops); it reads as the
expected instructions; every instruction keeps its user line; a T.Parallel loop whose layout
puts a fragment element on another thread is TC610 at the statement; what cannot be lowered yet
is TC502 at its line (and the CUDA pipeline records it and goes on)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft import interp
from tilecraft.block import Instruction, ParallelCompute
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import ParallelLoop
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.layout_inference.free import free_layout
from tilecraft.passes.lower_tile_ops import build_block_program, lowered_program
from tilecraft.passes.pipeline import PASSES
from tilecraft.targets import H100_SXM

from .arena_interp import random_inputs
from .random_programs import random_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from example_configs import CONFIGS, make  # noqa: E402

NOT_LOWERED: dict[str, str] = {}  # example id -> why (none today: every example lowers)


def _func(f):
    return getattr(f, "func", f)


def _assert_lowering_matches(func, seed: int = 0, dim: int = 300):
    """Run the Tile IR on the interpreter and the lowered program on the VM on the same random
    inputs, its shared tensors in one byte arena at the offsets the shared-memory plan gives
    them (so a tensor reusing bytes another still needs shows): every tensor ends bit for bit
    equal (NaNs included)."""
    from tilecraft.block.vm import run

    program = lowered_program(lower(func, H100_SXM))
    want = random_inputs(func, seed, dim)
    got = [x.copy() for x in want]
    interp.run(func, want)
    run(program, got, arena=True)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))
    return program


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c[0] not in NOT_LOWERED],
                         ids=lambda c: c[0])
def test_every_example_lowers_to_a_program_the_vm_runs_like_the_interpreter(cfg):
    _assert_lowering_matches(_func(make(cfg)))


def test_random_programs_lower_to_programs_the_vm_runs_like_the_interpreter(tmp_path):
    for seed in range(40):
        path = tmp_path / f"lower_prog_{seed}.py"
        path.write_text(random_program(seed))
        spec = importlib.util.spec_from_file_location(f"lower_prog_{seed}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _assert_lowering_matches(module.make(), seed)


def test_the_pipeline_leaves_the_block_program_on_the_state():
    state = lower(_func(make(CONFIGS[0])), H100_SXM)
    assert state.block_program is not None and state.lowering_refusal is None
    assert "block_program" in state.produced


# ---- the less common ops ---------------------------------------------------------------------
@T.prim_func
def assorted(A: T.Tensor((32, 64), "float16"), B: T.Tensor((64, 32), "float16"),
             C: T.Tensor((64, 64), "float32"), D: T.Tensor((16, 64), "float32"),
             E: T.Tensor((64, 32), "float32")):
    with T.Kernel(2, threads=128) as bx:
        A_s = T.alloc_shared((32, 64), "float16")
        B_s = T.alloc_shared((64, 32), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        S = T.alloc_shared((16, 64), "float32")
        F = T.alloc_fragment((16, 64), "float32")
        G = T.alloc_fragment((16, 64), "float32")
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, acc, transpose_A=True, transpose_B=True, clear_accum=True)
        T.atomic_add(C[0, 0], acc)
        T.copy(D[0, 0], S)
        T.fill(S[0:2, 0:64], 0.5)
        T.cumsum(S, dim=1, reverse=True)
        T.copy(S, F)
        T.cumsum(F, G, dim=0)
        T.copy(G, D[0, 0])
        T.copy(B_s, E[0, 0])


def test_transposed_gemm_operands_cumsums_atomics_and_partial_fills_match_the_interpreter():
    program = _assert_lowering_matches(assorted)
    text = str(program)
    assert "cumsum(" in text and "atomic_add_global(acc" in text
    # on wgmma: one dot_shared on the stored tiles (tests/passes/test_lower_gemm_to_dot_shared.py
    # checks the mma.sync form, transposed operands through `view`, on sm_80)
    assert "dot_shared(A_s, B_s, acc, out=acc, trans_a=True, trans_b=True)" in text


@T.prim_func
def histogram(A: T.Tensor((16,), "int32"), H: T.Tensor((4,), "int32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(16):  # 16 elements on 128 threads: each held by 8 replicas
            T.atomic_add(H[(A[i] + i) % 4], 1)


@T.prim_func
def column_sums(X: T.Tensor((12, 40), "float32"), S: T.Tensor((40,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        t = T.alloc_fragment((12, 40), "float32")
        T.copy(X[0, 0], t)
        for i, j in T.Parallel(12, 40):  # 480 elements on 128 threads: replicated
            T.atomic_add(S[j], t[i, j])  # a value loaded from a register: once per element


@pytest.mark.parametrize("kernel", [histogram, column_sums], ids=["index", "loaded value"])
def test_a_scalar_atomic_in_a_replicated_parallel_loop_counts_each_element_once(kernel):
    program = _assert_lowering_matches(kernel)
    par = next(s for s in walk(program.body) if isinstance(s, ParallelCompute))
    assert par.layout.is_replicated


@T.prim_func
def small(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 64), "float16")
        B_s = T.alloc_shared((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        m = T.alloc_fragment((64,), "float32")
        T.clear(acc)
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, acc)
        T.reduce_max(acc, m, dim=1)
        for i, j in T.Parallel(64, 64):
            acc[i, j] = acc[i, j] - m[i]  # marker: parallel body
        T.copy(acc, C[0, 0])


def test_a_small_kernel_prints_as_the_expected_instructions():
    program = _assert_lowering_matches(small)
    lines = [ln.strip() for ln in str(program).splitlines()]
    expected = ["A_s = allocate_shared(float16[64, 64]", "acc = allocate_register(float32[64, 64]",
                "fill(acc, 0.0)", "load_global(A, offset=[0, 0], out=", "store_shared(",
                "dot_shared(A_s, B_s, acc, out=acc)", "reduce_max(acc, out=m, dim=1)",
                "for i, j in parallel(64, 64, layout=", "acc[i, j] = acc[i, j] - m[i]",
                "cast(acc, out=", "store_global("]
    at = 0
    for want in expected:  # in this order
        found = [k for k in range(at, len(lines)) if lines[k].startswith(want)]
        assert found, f"no {want!r} after line {at} of\n{program}"
        at = found[0] + 1


def test_every_instruction_keeps_the_line_of_the_statement_it_comes_from():
    program = _assert_lowering_matches(small)
    first, last = _line_of("def small("), _line_of("T.copy(acc, C[0, 0])")
    instrs = [s for s in walk(program.body) if isinstance(s, Instruction)]
    assert len(instrs) >= 12
    assert all(s.span is not None and first < s.span.line <= last for s in instrs)
    par = next(s for s in instrs if isinstance(s, ParallelCompute))
    assert par.span.line == _line_of("# marker: parallel body") - 1


# ---- diagnostics -----------------------------------------------------------------------------
def _line_of(marker: str) -> int:
    """The line of this file holding `marker` (not counting this lookup's own lines)."""
    src = Path(__file__).read_text().splitlines()
    return 1 + next(k for k, ln in enumerate(src) if marker in ln and "_line_of(" not in ln)


def test_a_parallel_loop_reading_a_fragment_element_of_another_thread_is_tc610_at_its_line():
    state = lower(small, H100_SXM, PASSES[:-1])
    loop = next(s for s in walk(state.kernel.body) if isinstance(s, ParallelLoop))
    wrong = free_layout((64, 64), 128, 4)  # not the gemm accumulator's layout of `acc`
    assert wrong != state.layouts[next(b for b in state.layouts if b.name == "acc")]
    state.loop_layouts[loop] = wrong
    program = build_block_program(state)
    with pytest.raises(TilecraftError) as err:
        program.run(*random_inputs(small, 0, 1))
    assert err.value.code == "TC610"
    assert err.value.line == _line_of("# marker: parallel body")


def test_what_cannot_be_lowered_yet_is_tc502_at_its_line_and_the_pipeline_goes_on():
    @T.prim_func
    def scalar_fragment(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64,), "float32")
            T.copy(A[0], f)
            B[0] = f[3] + 1.0  # marker: scalar fragment load
            T.copy(f, B[0])

    with pytest.raises(TilecraftError) as err:
        lowered_program(lower(scalar_fragment, H100_SXM, PASSES[:-1]))
    assert err.value.code == "TC502"
    assert err.value.line == _line_of("# marker: scalar fragment load")
    state = lower(scalar_fragment, H100_SXM)
    assert state.block_program is None and state.lowering_refusal.code == "TC502"


def test_gemm_operands_follow_the_accumulators_warps_so_mma_is_selected():
    """LA/LB come from the accumulator's layout divided by the mma atom (each warp loads the A
    rows and B columns of the C blocks it holds), so the dot's layouts divide by the atom."""
    from tilecraft.block import Dot
    from tilecraft.block.select import select_dot
    from tilecraft.targets import A100_SXM  # (on H100 these gemms are dot_shared: wgmma)

    for name in ("gemm_partial", "gemm_relu"):
        cfg = next(c for c in CONFIGS if c[0] == name)
        program = lowered_program(lower(make(cfg).func, A100_SXM))
        (dot,) = [s for s in walk(program.body) if isinstance(s, Dot)]
        assert select_dot(dot, program.num_threads) is not None, name


def test_shared_tiles_a_parallel_loop_only_reads_are_loaded_into_registers_first():
    """The RMSNorm's normalising loop reads X_chunk[i, j] and g_chunk[j]: both become register
    tiles in the loop's layout (g_chunk's reduced over i) loaded by load_shared (vectors),
    and the program still computes the interpreter's bits."""
    from tilecraft.block import LoadShared, ParallelCompute

    func = _func(make(next(c for c in CONFIGS if c[0] == "rmsnorm_silu")))
    program = _assert_lowering_matches(func)
    loops = [s for s in walk(program.body) if isinstance(s, ParallelCompute)]
    loads = [s for s in walk(program.body) if isinstance(s, LoadShared)]
    assert {ld.src.name for ld in loads} >= {"X_chunk", "g_chunk"}
    for loop in loops:  # no shared tensor is read element by element any more
        assert not any(t.buffer.scope == "shared" for t in loop.tensors)

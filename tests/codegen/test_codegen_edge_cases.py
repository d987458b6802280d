"""Generated CUDA for kernels unlike the benchmarked ones: gemm operands that are slices of a
bigger buffer, user names like the emitter's helpers (acc, src_t, d_lo, split), two masked
T.Parallel loops in one scope, vectorized fragment copies over uneven register runs, and value
ranges where C arithmetic wraps."""

import re

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.options import CompileOptions


def _source(factory, **switches) -> str:
    return generate_cuda(factory.func, options=CompileOptions.for_arch("sm_90a", **switches)).source


def _c_eval(expr: str, env: dict) -> int:
    # the printed index expressions use + * / % ^ >> & on non-negative ints: `/` is floor division
    return eval(expr.replace("/", "//"), {}, dict(env))


def _ldmatrix_rows(src: str, smem: str) -> list[list[int]]:
    """For each ldmatrix of shared tile `smem` (in order), the element offset of the row each of
    the 128 threads supplies: the printed `<tile>_row` declaration and the load's address,
    evaluated per thread."""
    rows = dict(re.findall(r"const int (\w+_row) = (.*);  //", src))
    out = []
    for addr in re.findall(rf"ldmatrix_x4(?:_trans)?\(.*, &{smem}_\[(.*)\]\);", src):
        (name,) = re.findall(r"\w+_row", addr)
        out.append([_c_eval(addr, {name: _c_eval(rows[name], {"tid": t})}) for t in range(128)])
    return out


def _shared_layout(factory, name: str):
    from tilecraft.block import AllocateShared
    from tilecraft.ir.visitor import walk
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.passes.pipeline import lower
    from tilecraft.targets import H100_SXM

    prog = lowered_program(lower(factory.func, H100_SXM))
    return next(s.out.layout for s in walk(prog.body)
                if isinstance(s, AllocateShared) and s.out.buffer.name == name)


def _reads_exactly(loads: list[list[int]], want: set[int]) -> None:
    """Each ldmatrix.x4 gives its warp 32 distinct rows, and together they read `want`."""
    assert loads
    for vals in loads:
        for w in range(0, 128, 32):
            assert len(set(vals[w:w + 32])) == 32
    got = {v for vals in loads for v in vals}
    assert got == want, (sorted(got - want)[:4], sorted(want - got)[:4])


@tilecraft.jit
def gemm_on_a_column_slice():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"),
          C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((64, 128), "float16")
            acc_c = T.alloc_fragment((128, 128), "float32")
            T.clear(acc_c)
            T.copy(A[0, 0], As)
            T.copy(B[0, 0], Bs)
            T.gemm(As[:, 32:64], Bs[32:64, :], acc_c)  # the second half of K only
            T.copy(acc_c, C[0, 0])

    return k


def test_gemm_reads_the_slice_it_was_given():
    """The mma.sync path (wgmma off): the A loads read the 8-element rows of columns 32..63."""
    src = _source(gemm_on_a_column_slice(), wgmma=False)
    layout = _shared_layout(gemm_on_a_column_slice(), "As")
    want = {int(layout.offset(r, c)) for r in range(128) for c in range(32, 64, 8)}
    _reads_exactly(_ldmatrix_rows(src, "As"), want)


@tilecraft.jit
def gemm_on_one_stage_of_a_3d_buffer():
    @T.prim_func
    def k(A: T.Tensor((128, 32), "float16"), B: T.Tensor((32, 128), "float16"),
          C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((2, 128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            acc_c = T.alloc_fragment((128, 128), "float32")
            T.clear(acc_c)
            T.copy(A[0, 0], As[1, :, :])
            T.copy(B[0, 0], Bs)
            T.gemm(As[1, :, :], Bs, acc_c)
            T.copy(acc_c, C[0, 0])

    return k


def test_gemm_on_a_3d_buffer_reads_its_stage():
    src = _source(gemm_on_one_stage_of_a_3d_buffer(), wgmma=False)
    layout = _shared_layout(gemm_on_one_stage_of_a_3d_buffer(), "As")
    want = {int(layout.offset(1, r, c)) for r in range(128) for c in range(0, 32, 8)}
    assert min(want) >= 128 * 32  # stage 1
    _reads_exactly(_ldmatrix_rows(src, "As"), want)


@tilecraft.jit
def pipelined_gemm():
    @T.prim_func
    def k(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
          C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for ko in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, ko * 32], As)
                T.copy(B[ko * 32, bx * 128], Bs)
                T.gemm(As, Bs, acc)
            T.copy(acc, C[by * 128, bx * 128])

    return k


def test_an_accumulator_named_acc_is_not_shadowed_by_a_helper():
    src = _source(pipelined_gemm())
    assert "float acc_[" in src  # the user's fragment keeps its name (mangled)
    # a declaration `T* x = &x[...]` reads the new, uninitialized x (the C++ point of declaration)
    assert not re.search(r"\b(\w+) = &\1\[", src), re.search(r".*\b(\w+) = &\1\[.*", src).group(0)


@tilecraft.jit
def fragment_rows_of_six():
    from tilecraft.layout import local, spatial

    @T.prim_func
    def k(A: T.Tensor((32, 12), "float32"), B: T.Tensor((32, 12), "float32")):
        with T.Kernel(1, threads=64) as bx:
            f = T.alloc_fragment((32, 12), "float32")
            T.annotate_layout({f: spatial(32, 2) * local(1, 6)})  # 6 consecutive per thread
            T.copy(A[0, 0], f)
            T.copy(f, B[0, 0])

    return k


def test_fragment_vectors_stay_inside_a_run_of_consecutive_registers():
    src = _source(fragment_rows_of_six())
    steps = [int(x) for x in re.findall(r"// (?:load|store) in vectors of (\d+)\n", src)]
    assert len(steps) == 2 and all(v > 1 and 6 % v == 0 for v in steps), steps  # not 4: f[6], f[7]
    assert len(re.findall(r"for \(int g = 0; g < 3; \+\+g\)", src)) == 2  # 3 vectors of 2


def test_ranges_give_up_where_c_arithmetic_wraps():
    from tilecraft.ir import BinOp, Const, Var
    from tilecraft.ir.ranges import bound

    x = Var.create("x")
    u = Var.create("u", "uint32")
    assert bound(x * 2 + 1, {x: (0, 9)}) == (1, 19)
    assert bound(_cast(x, "uint32"), {x: (-1, 0)}) is None  # -1 -> 2^32 - 1
    assert bound(_cast(x, "int8"), {x: (0, 200)}) is None  # 200 -> -56
    assert bound(_cast(x, "int64"), {x: (-5, 7)}) == (-5, 7)
    assert bound(BinOp.create("-", u, Const.create(5, "uint32")), {u: (0, 10)}) is None
    assert bound(x * 65536 * 65536 // 65536, {x: (0, 3)}) is None  # int32 overflow in between


def _cast(e, dtype):
    from tilecraft.ir import cast

    return cast(dtype, e)


@tilecraft.jit
def user_names_like_the_helpers():
    @T.prim_func
    def k(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
          C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            S = T.alloc_fragment((128, 128), "float32")
            src_t = by * 128
            dst_t = bx * 128
            d_lo = bx * 128 - by * 128
            T.clear(S)
            for ko in T.Pipelined(8, num_stages=3):
                T.copy(A[src_t, ko * 32], As)
                T.copy(B[ko * 32, dst_t], Bs)
                T.gemm(As, Bs, S)
            for i, j in T.Parallel(128, 128):
                S[i, j] = T.if_then_else(i + d_lo >= j, S[i, j], 0)
            T.copy(S, C[by * 128, bx * 128])

    return k


def test_user_variables_do_not_collide_with_the_emitters_locals():
    src = _source(user_names_like_the_helpers())
    for helper in ("src_t", "dst_t", "d_lo"):
        for decl in re.findall(rf"\b{helper}\b = [^;]*;", src):
            assert not re.search(rf"\b{helper}\b", decl.split("=", 1)[1]), decl


@tilecraft.jit
def two_masks_in_one_scope():
    @T.prim_func
    def k(A: T.Tensor((256, 256), "float32"), C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            S = T.alloc_fragment((128, 128), "float32")
            T.copy(A[by * 128, bx * 128], S)
            for i, j in T.Parallel(128, 128):  # causal
                S[i, j] = T.if_then_else(by * 128 + i >= bx * 128 + j, S[i, j], 0)
            for i, j in T.Parallel(128, 128):  # and a window
                S[i, j] = T.if_then_else(by * 128 + i <= bx * 128 + j + 64, S[i, j], 0)
            T.copy(S, C[by * 128, bx * 128])

    return k


def test_two_masked_loops_in_one_scope_compile():
    import pytest

    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(two_masks_in_one_scope().func, "sm_90a")
    assert gen.source.count("const int d_lo =") == 2
    compile_cuda(gen.source, "sm_90a", name=gen.name)  # d_lo / d_hi declared once per scope


@tilecraft.jit
def split_k_named_split():
    @T.prim_func
    def k(A: T.Tensor((256, 1024), "float16"), B: T.Tensor((1024, 256), "float16"),
          C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, 4, threads=128) as (bx, by, split):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            acc_c = T.alloc_fragment((128, 128), "float32")
            T.clear(acc_c)
            for ko in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, split * 256 + ko * 32], As)
                T.copy(B[split * 256 + ko * 32, bx * 128], Bs)
                T.gemm(As, Bs, acc_c)
            T.atomic_add(C[by * 128, bx * 128], acc_c)

    return k


def test_hoisted_copy_pointers_keep_variables_ending_in_it():
    src = _source(split_k_named_split(), tma=False)  # cp.async copies (TMA issues no pointer)
    ptrs = [ln for ln in src.splitlines() if "const half* src_t =" in ln]
    assert ptrs and all("split_ * 256" in ln for ln in ptrs), ptrs[:1]  # not `spl0 * 256`


@tilecraft.jit
def gemm_into_half_an_accumulator():
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 128), "float16"),
          C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            T.copy(A[0, 0], As)
            T.copy(B[0, 0], Bs)
            T.gemm(As, Bs, c[64:128, :])  # the mma layout would cover c[0:64] instead
            T.copy(c, C[0, 0])

    return k


def test_gemm_into_part_of_a_fragment_is_refused():
    import pytest

    from tilecraft.diagnostics import TilecraftError

    with pytest.raises(TilecraftError) as e:
        generate_cuda(gemm_into_half_an_accumulator().func, "sm_90a")
    assert e.value.code == "TC502" and "part of the fragment" in str(e.value)

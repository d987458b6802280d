"""The CUDA printer owns every identifier it declares: a user buffer or value named like one of
the emitters' own locals (`red`, `tid`, `acc`, `scratch`, ...) is printed under a mangled name
(a trailing underscore, a form no compiler-declared name has), so nothing is shadowed."""

import importlib.util
import re

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda

# names the emitters declare (and C/CUDA names a user may well pick)
COMPILER_LIKE = ["red", "tid", "acc", "scratch", "lane", "warp", "li", "j", "val", "ok", "it",
                 "src_t", "dst_t", "a_frag", "b_frag", "int", "float", "threadIdx", "min"]


def _kernel_with_names():
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float32"), B: T.Tensor((128,), "float32"),
          C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((128, 64), "float32")
            red = T.alloc_fragment((128,), "float32")
            scratch = T.alloc_shared((128, 64), "float32")
            T.copy(A[0, 0], scratch)
            T.copy(scratch, acc)
            T.reduce_max(acc, red, dim=1)
            T.copy(red, B[0])
            for lane, warp in T.Parallel(128, 64):
                tid = acc[lane, warp] - red[lane]
                C[lane, warp] = tid

    return k


def _declared(src: str) -> list[str]:
    """Identifiers declared in the kernel body (variables, arrays, loop counters, pointers)."""
    body = src.split('extern "C"')[1]
    pat = r"(?:^|[;{(]|\s)(?:const\s+)?(?:[\w:]+(?:<[^<>]*>)?)\s*\*?\s+(\w+)\s*(?:\[[^\]]*\])?\s*(?:=|;|\[)"
    return [m.group(1) for m in re.finditer(pat, body, re.M)]


def _source(func) -> str:
    return generate_cuda(func, "sm_90a").source


def test_user_names_never_collide_with_names_the_compiler_declares():
    src = _source(_kernel_with_names().func)
    declared = _declared(src)
    for user in ("acc", "red", "scratch", "lane", "warp", "tid"):
        assert f"{user}_" in declared or f"{user}_[" in src, user
    user_c = {d for d in declared if d.endswith("_")}
    compiler_c = [d for d in declared if not d.endswith("_")]
    # the compiler still declares its own `red`, `tid`, ...; the user's are `red_`, `tid_`, ...
    assert "red" in compiler_c and "tid" in compiler_c
    assert not user_c & set(compiler_c)


@pytest.mark.parametrize("name", COMPILER_LIKE)
def test_a_buffer_named_like_a_compiler_local_is_mangled(name, tmp_path):
    code = f"""
import tilecraft, tilecraft.language as T
@tilecraft.jit
@T.prim_func
def k(A: T.Tensor((128, 64), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        x = T.alloc_fragment((128, 64), "float32")
        {name} = T.alloc_fragment((128,), "float32")
        T.copy(A[0, 0], x)
        T.reduce_max(x, {name}, dim=1)
        T.copy({name}, B[0])
"""
    path = tmp_path / f"user_names_{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = _source(mod.k.func)
    assert re.search(rf"\bfloat {re.escape(name)}_\[", src), name
    assert not re.search(rf"\bfloat {re.escape(name)}\[1\]", src)


def test_a_fragment_named_red_gets_the_row_max_on_the_interpreter():
    k = _kernel_with_names()
    a = torch.randn(128, 64, dtype=torch.float32)
    b = torch.full((128,), float("nan"))
    c = torch.full((128, 64), float("nan"))
    k(a, b, c)
    np.testing.assert_array_equal(b.numpy(), a.numpy().max(axis=1))
    np.testing.assert_array_equal(c.numpy(), (a - a.max(dim=1, keepdim=True).values).numpy())


@pytest.mark.gpu
def test_a_fragment_named_red_gets_the_row_max_on_the_gpu():
    k = _kernel_with_names()
    a = torch.randn(128, 64, dtype=torch.float32, device="cuda")
    b = torch.full((128,), float("nan"), device="cuda")
    c = torch.full((128, 64), float("nan"), device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(b, a.max(dim=1).values)
    assert torch.equal(c, a - a.max(dim=1, keepdim=True).values)


def test_the_block_printed_kernel_with_compiler_like_names_compiles():
    from tilecraft.runtime import compile_cuda

    src = _source(_kernel_with_names().func)
    assert compile_cuda(src, "sm_90a", name="k_kernel").resources.spill_stores == 0

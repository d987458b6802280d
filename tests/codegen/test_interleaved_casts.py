"""A cast into another register order: `T.cast(x, dtype, layout=L)` keeps each thread's elements
and reorders them (the same way in every thread). From words of 1-, 2- and 4-bit integers (and
4-bit floats) in `interleave_words` order to natural order it is the fast cast with no PRMT;
other reorderings convert element by element; moving elements between threads is refused. On
the GPU every code gives the interpreter's bits."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import Fragment, spatial
from tilecraft.layout.permute import interleave_words

from .fast_cast_programs import cast_program, every_code
from .sass import cuobjdump, sass


def _program(src: str, dst: str, n: int, threads: int = 32, blocks: int = 1, zero=None,
             order: str = "interleaved"):
    natural = spatial(threads).local(n)
    other = Fragment.create((threads * n,), (threads, 2, n // 2), (0,), (2, 1))  # (transposed)
    codes = interleave_words(natural, dt.resolve(src).bits) if order == "interleaved" \
        else other if order == "other" else natural
    return cast_program(src, dst, n, threads, blocks, zero=zero, codes_layout=codes)


def _source(prog) -> str:
    from tilecraft.codegen.block_cuda.build import generate_block

    return generate_block(prog, "sm_90a").source


@pytest.mark.parametrize("src,dst,n,zero", [("uint4", "float16", 32, None),
                                            ("int4", "bfloat16", 16, None),
                                            ("uint2", "float16", 32, 2),
                                            ("uint1", "float16", 64, 1),
                                            ("int2", "bfloat16", 16, None)])
def test_interleaved_words_take_the_fast_cast_in_natural_order(src, dst, n, zero):
    code = _source(_program(src, dst, n, zero=zero))
    bits, signed = dt.resolve(src).bits, str(src.startswith("int")).lower()
    bf16 = str(dst == "bfloat16").lower()
    assert f"tc::fast_cast_int<{bits}, {signed}, {bf16}, {n}, {zero or 0}, true>(codes_, " in code
    assert "tc::cast<" not in code


def test_interleaved_4_bit_floats_take_the_fast_cast_in_natural_order():
    code = _source(_program("float4_e2m1", "float16", 32))
    assert "tc::fast_cast_float<2, 1, 0, false, 32, true>(codes_, " in code
    assert "tc::cast<" not in code


def test_other_reorderings_convert_element_by_element():
    code = _source(_program("uint4", "float16", 16, order="other"))
    assert "tc::fast_cast" not in code
    assert re.search(r"const int perm\d+\[16\] = \{0, 2, 4, 6, 8, 10, 12, 14, 1, 3,", code)


def test_the_interleaved_cast_has_no_byte_permutes():
    pytest.importorskip("cuda.bindings.nvrtc")
    if cuobjdump() is None:
        pytest.skip("cuobjdump is not installed (pip test extras)")
    from tilecraft.codegen.block_cuda.build import generate_block
    from tilecraft.runtime import compile_cuda

    ops = {}
    for order in ("natural", "interleaved"):
        gen = generate_block(_program("uint4", "float16", 64, order=order), "sm_90a")
        cubin = compile_cuda(gen.source, "sm_90a", name=gen.name).cubin
        ops[order] = [ln for ln in sass(cubin) if re.search(r"\bPRMT\b", ln)]
    assert len(ops["natural"]) >= 32 and ops["interleaved"] == []


def test_the_interpreter_reorders_each_thread_like_the_layouts_say():
    n, threads = 16, 32
    prog = _program("uint4", "float16", n, threads)
    out = np.zeros(threads * n, np.float16)
    prog.run(every_code("uint4", n, threads, 1), out)
    codes = (np.arange(threads)[:, None] + 7 * np.arange(n)[None, :]) % 16  # by position
    perm = [(j % 2) * 4 + j % 8 // 2 + j // 8 * 8 for j in range(n)]  # position of element j
    np.testing.assert_array_equal(out.reshape(threads, n), codes[:, perm].astype(np.float16))


def test_a_cast_that_moves_elements_between_threads_is_refused_at_its_line():
    @tilecraft.jit(target="interp")
    def k(A: T.Tensor((32, 8), "uint8"), B: T.Tensor((32, 8), "float16")):
        with T.Kernel(1, threads=32):
            a = T.load_global(A, layout=spatial(32).local(8), offset=[0, 0])
            b = T.cast(a, "float16", layout=spatial(8, 4).local(4, 2))
            T.store_global(b, B, offset=[0, 0])

    with pytest.raises(TilecraftError) as err:
        k(np.zeros((32, 8), np.uint8), np.zeros((32, 8), np.float16))
    assert "reorder each thread's elements" in str(err.value)
    assert err.value.span is not None and err.value.span.line is not None


def test_a_layout_for_a_scalar_cast_is_refused():
    @tilecraft.jit(target="interp")
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = T.cast(1, "float32", layout=spatial(32))

    with pytest.raises(TilecraftError) as err:
        k(np.zeros(4, np.float32))
    assert err.value.code == "TC603" and "register tensors" in str(err.value)


THREADS, BLOCKS = 128, 2


@pytest.mark.gpu
@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
@pytest.mark.parametrize("src", ["uint1", "uint2", "int2", "uint4", "int4", "float4_e2m1",
                                 "float4_e1m2"])
def test_every_code_of_interleaved_words_matches_the_interpreter_on_the_gpu(src, dst):
    import torch

    from tilecraft.codegen.block_cuda import build_block_kernel
    from tilecraft.targets import current_target

    n = 64
    zero = {"uint4": 8, "uint2": 2}.get(src)
    for order in ("interleaved", "other"):
        prog = _program(src, dst, n, THREADS, BLOCKS, zero=zero, order=order)
        kernel = build_block_kernel(prog, current_target().arch)
        assert ("true>(codes_" in kernel.source) == (order == "interleaved")
        data = torch.from_numpy(every_code(src, n, THREADS, BLOCKS)).cuda()
        out = torch.zeros(THREADS * BLOCKS * n, dtype=dt.resolve(dst).torch_dtype, device="cuda")
        kernel(data, out)
        want = np.zeros(THREADS * BLOCKS * n, dt.resolve(dst).np_dtype)
        prog.run(every_code(src, n, THREADS, BLOCKS), want)
        got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        bad = np.flatnonzero(got != want.view(np.uint16))
        assert bad.size == 0, (order, [(int(i), hex(got[i]), hex(want.view(np.uint16)[i]))
                                       for i in bad[:8]])

"""A global load whose offset goes through a let (`g0 = bx * 64; T.copy(S[0, g0], S_s)`) is
vectorized like the same offset written inline: instruction selection expands the lets before
it proves the offset's alignment (an offset that is not a multiple keeps the element loop)."""

from __future__ import annotations

import re

import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


def _source(step: int) -> str:
    @tilecraft.jit
    def factory():
        @T.prim_func
        def k(S: T.Tensor((128, 4096), "float16"), O: T.Tensor((128, 64), "float16")):
            with T.Kernel(4, threads=128) as bx:
                S_s = T.alloc_shared((128, 64), "float16")
                g0 = bx * step
                T.copy(S[0, g0], S_s)
                T.copy(S_s, O)

        return k

    return generate_cuda(factory().func, "sm_90a").source


@pytest.mark.parametrize("step, vector", [(64, True), (3, False)])
def test_an_offset_through_a_let_is_vectorized_when_it_is_a_multiple(step, vector):
    code = _source(step)
    load = code[code.index("load_global(S"):]
    load = load[:load.index("store_shared")]
    assert bool(re.search(r"load_vec<half, 8>", load)) == vector, load

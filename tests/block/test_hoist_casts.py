"""hoist_casts: a TileLang dequantization (`T.cast(wf[i, j], "float16") * S[j]` in T.Parallel, wf a
uint4/uint8/... fragment) becomes one block `cast` of the fragment into a temporary before the
loop, which the loop reads; the VM's results are unchanged bit for bit (float8 NaNs of both
signs included); nothing is hoisted where the loop writes the fragment, where no fast cast
exists (float32 results) or where the temporary would take too many registers. The pass
pipeline and the Tilus-level `prepare` both run it."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft.language as T
from tilecraft import dtypes as dt
from tilecraft.block import Cast, ParallelCompute
from tilecraft.block.hoist_casts import hoist_casts
from tilecraft.block.prepare import prepare
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.pipeline import PASSES
from tilecraft.targets import H100_SXM


def _dequant(src: str, dst: str = "float16", k: int = 16, n: int = 64, threads: int = 128,
             write_back: bool = False):
    @T.prim_func
    def kern(W: T.Tensor((k, n), src), S: T.Tensor((n,), dst), Y: T.Tensor((k, n), dst)):
        with T.Kernel(1, threads=threads) as bx:
            ws = T.alloc_shared((k, n), src)
            wf = T.alloc_fragment((k, n), src)
            yf = T.alloc_fragment((k, n), dst)
            T.copy(W[0:k, 0:n], ws)
            T.copy(ws, wf)
            for i, j in T.Parallel(k, n):
                yf[i, j] = T.cast(wf[i, j], dst) * S[j]
                if write_back:
                    wf[i, j] = wf[i, j] + wf[i, j]
            T.copy(yf, Y[0:k, 0:n])

    return kern


def _before(func):
    """The lowered program just before instruction selection (which hoists)."""
    return lower(func, H100_SXM, passes=PASSES[:-1]).block_program


def _loop(program) -> ParallelCompute:
    return next(s for s in walk(program.body) if isinstance(s, ParallelCompute))


def test_the_cast_in_the_loop_becomes_a_block_cast_before_it():
    before = _before(_dequant("uint4"))
    after = hoist_casts(before, H100_SXM)
    assert "yf[i, j] = T.cast(wf[i, j], 'float16') * S[j]" in before.script()
    lines = [ln.strip() for ln in after.script().splitlines()]
    at = lines.index("cast(wf, out=wf_f16)")
    assert lines[at - 1] == ("wf_f16 = allocate_register(float16[16, 64], "
                             "layout=spatial(16, 8).local(1, 8))")
    assert lines[at + 1].startswith("for i, j in parallel(16, 64")
    assert lines[at + 2] == "yf[i, j] = wf_f16[i, j] * S[j]"
    assert "wf_f16" in {t.name for t in _loop(after).tensors}


def _codes(src: str, shape) -> np.ndarray:
    d = dt.resolve(src)
    codes = (np.arange(int(np.prod(shape))) * 37 % (1 << d.bits)).reshape(shape)
    if d.bits == 8 and d.is_standard:  # every code, NaNs of both signs included
        return codes.astype(np.uint8).view(d.np_dtype)
    return dt.pack(codes, d)


@pytest.mark.parametrize("dst", ["float16", "bfloat16"])
@pytest.mark.parametrize("src", ["uint4", "int4", "uint8", "int8", "uint3", "int6",
                                 "float8_e4m3", "float8_e5m2", "float4_e2m1", "float6_e3m2"])
def test_the_vm_computes_the_same_bits_before_and_after(src, dst):
    before = _before(_dequant(src, dst))
    after = hoist_casts(before, H100_SXM)
    assert any(isinstance(s, Cast) for s in walk(after.body))
    w = _codes(src, (16, 64))
    s = np.linspace(-3, 3, 64).astype(dt.resolve(dst).np_dtype)
    got = []
    for program in (before, after):
        y = np.zeros((16, 64), dt.resolve(dst).np_dtype)
        program.run(w, s, y)
        got.append(y.view(np.uint16))
    assert np.array_equal(got[0], got[1])
    if src.startswith("float8"):
        assert np.isnan(got[0].view(dt.resolve(dst).np_dtype).astype(np.float32)).any()


@pytest.mark.parametrize("why,func", [
    ("the loop writes the fragment", lambda: _dequant("uint8", write_back=True)),
    ("no fast cast to float32", lambda: _dequant("uint4", "float32")),
    ("a 128-register temporary", lambda: _dequant("uint4", k=64, n=128, threads=32)),
])
def test_nothing_is_hoisted(why, func):
    before = _before(func())
    assert hoist_casts(before, H100_SXM) is before, why


def test_the_pipeline_and_prepare_hoist():
    state = lower(_dequant("int4"), H100_SXM)
    casts = [s for s in walk(state.block_program.body) if isinstance(s, Cast)]
    assert len(casts) == 1 and type(state.prepared.plans[id(casts[0])]).__name__ == "CastPlan"
    prepared = prepare(_before(_dequant("int4")), H100_SXM)
    casts = [s for s in walk(prepared.program.body) if isinstance(s, Cast)]
    assert len(casts) == 1 and type(prepared.plans[id(casts[0])]).__name__ == "CastPlan"

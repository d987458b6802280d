"""A wgmma whose A comes from registers, left in flight across iterations (pipeline_copies with
the quantized matmul's prefill loop: dequantize in registers, then dot_shared).

wgmma reads its A registers until the wait that completes it, so on the block VM an
asynchronous dot_shared takes its register A when issued and writing that tensor before the
wait is TC611; the pass gives each of two iterations its own registers. Compiled (NVRTC 13,
sm_90a; SASS where cuobjdump exists), ptxas keeps the pipeline as written: no serialization,
one group left running at each wait, the next step's dequantization issued while the previous
step's wgmma runs, and no instruction touching the registers of a running wgmma, across the
loop's back edge too."""

import re

import numpy as np
import pytest

from tilecraft.block import AllocateRegister, BinaryOp, Dot, DotShared, DotWaitGroup, RegisterTensor
from tilecraft.diagnostics import TilecraftError

from ..block.dot_shared_programs import A_REG, Parts, inputs
from ..block.programs import here
from .sass import cuobjdump, sass, wgmma_register_races


def test_two_register_buffers_keep_one_dot_in_flight_with_the_values_at_issue():
    """dot(ra) in flight while ra2 = 2 ra is made (reading ra is allowed), dot(ra2), then the
    waits: the bits of the two synchronous dots."""
    p = Parts()
    ra2 = RegisterTensor.create("ra2", "float16", A_REG)
    body = p.stage() + [
        DotShared.create(p.ra, p.sb, p.acc, asynchronous=True),
        AllocateRegister.create(ra2), BinaryOp.create("*", p.ra, 2.0, ra2),
        DotShared.create(ra2, p.sb, p.acc, asynchronous=True), DotWaitGroup.create(1),
        DotWaitGroup.create(0),
        Dot.create(p.ra, p.rb, p.acc2), Dot.create(ra2, p.rb, p.acc2)] + p.store()
    args = inputs(p)
    p.program(body).run(*args)
    c, d = args[-2:]
    np.testing.assert_array_equal(c.view(np.uint32), d.view(np.uint32))
    a, b, c0 = (x.astype(np.float64) for x in inputs(p)[2:5])
    np.testing.assert_allclose(c, c0 + 3 * a @ b, rtol=1e-5, atol=1e-4)


def test_rewriting_the_register_a_of_a_pending_dot_is_tc611_at_the_writer():
    p = Parts()
    dot_line = here() + 1
    body = p.stage() + [DotShared.create(p.ra, p.sb, p.acc, asynchronous=True),
                        BinaryOp.create("*", p.ra, 2.0, p.ra),  # before the wait
                        DotWaitGroup.create(0)] + p.store()
    line = here() - 2
    with pytest.raises(TilecraftError) as e:
        p.program(body).run(*inputs(p))
    assert e.value.code == "TC611" and e.value.span.line == line
    assert "`ra` is written" in str(e.value) and f"line {dot_line}" in str(e.value)


def _main_loop(lines: list[str]) -> list[str]:
    """The instructions of the backward branch's body with the most HGMMAs, the shortest of
    those (an mbarrier's out-of-line retry, placed after the loop, jumps back into it: its
    span holds the loop's HGMMAs too, and the code after the loop)."""
    addr = [int(re.search(r"/\*([0-9a-f]{4,})\*/", ln).group(1), 16) for ln in lines]
    best, best_key = None, None
    for i, ln in enumerate(lines):
        m = re.search(r"BRA 0x([0-9a-f]+)", ln)
        if m and int(m.group(1), 16) < addr[i]:
            j = addr.index(int(m.group(1), 16))
            key = (sum("HGMMA" in x for x in lines[j:i + 1]), -(i - j))
            if best_key is None or key > best_key:
                best, best_key = (j, i), key
    assert best is not None, "no loop"
    return lines[best[0]:best[1] + 1]


_MATH = re.compile(r"\b(LOP3|HFMA2|HADD2|HMUL2|PRMT|I2F|F2F|I2FP)\b")


def _math_while_running(lines: list[str]) -> list[int]:
    """Per wgmma group completed in `lines`: the arithmetic instructions issued while it ran
    (from its last HGMMA, marked gsb0, to the WARPGROUP.DEPBAR that completes it)."""
    running: list[int] = []
    done = []
    for ln in lines:
        if re.search(r"HGMMA\S*.*\bgsb0\b", ln):
            running.append(0)
            continue
        m = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x(\d+)", ln)
        if m:
            keep = int(m.group(1), 16)
            while len(running) > keep:
                done.append(running.pop(0))
        elif _MATH.search(ln):
            running = [n + 1 for n in running]
    return done


@pytest.mark.skipif(cuobjdump() is None, reason="needs cuobjdump (pip nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("wtype, M, N, K", [("uint4", 4096, 8192, 8192),
                                            ("float6_e3m2", 64, 4096, 4096)])
def test_the_prefill_qmm_dequantizes_while_its_wgmma_runs_on_other_registers(wtype, M, N, K):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.codegen.cuda.build import generate_cuda
    from tilecraft.dtypes import resolve
    from tilecraft.quant.qmm import choose_config
    from tilecraft.quant.qmm_kernel import qmm_kernel
    from tilecraft.runtime import compile_cuda

    cfg = choose_config(M, N, K, resolve(wtype).bits, 128)
    kernel = qmm_kernel(M, N, K, wtype, "float16", 128, 8 if wtype == "uint4" else 0, False,
                        False, **cfg)
    gen = generate_cuda(kernel.func, "sm_90a")
    compiled = compile_cuda(gen.source, "sm_90a", name=gen.name)
    assert "serialized" not in compiled.log and "C7517" not in compiled.log, compiled.log
    loop = _main_loop(sass(compiled.cubin))
    twice = loop + loop  # the back edge: the next trip's first instructions
    assert wgmma_register_races(twice) == []
    assert re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d+)", "\n".join(loop)) == ["0x1"] * 2
    assert sum("HGMMA" in ln for ln in loop) == 8  # two k steps of four k16 wgmma
    overlap = _math_while_running(twice)
    assert len(overlap) >= 2 and min(overlap) >= 16, overlap

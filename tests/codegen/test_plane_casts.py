"""Bit planes cast at once: the quantized matmul stores 5-bit integers (and until session 24 3-,
6- and 7-bit ones) as 1-, 2- and 4-bit planes and adds them back (`cast(hi) * 2^s + cast(lo) -
T`); that sum prints as one `tc::fast_cast_planes` (block/select_planes.py; its bits are
checked for every code by test_fast_casts_host.py), at decode (mma.sync) and before a wgmma
alike. What the kernel computes does not change: the VM runs the instructions as written, and
tests/quant compares both paths with the dequantized reference on the GPU."""

from __future__ import annotations

import re

import pytest

from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.dtypes import resolve
from tilecraft.quant.qmm import choose_config, plane_bits
from tilecraft.quant.qmm_kernel import qmm_kernel


def _source(wtype: str, M: int, zero: int = 0, has_zeros: bool = False,
            xtype: str = "float16") -> str:
    N, K = 256, 1024
    cfg = choose_config(M, N, K, resolve(wtype).bits, 128, wtype)
    kernel = qmm_kernel(M, N, K, wtype, xtype, 128, zero, has_zeros, False, **cfg)
    return generate_cuda(kernel.func, "sm_90a").source


@pytest.mark.parametrize("wtype, zero", [("uint5", 0), ("uint5", 16), ("int5", 0)])
def test_a_wgmma_loop_casts_its_planes_at_once(wtype, zero):
    src = _source(wtype, 4096, zero)
    hi, lo = plane_bits(wtype)
    offset = (1 << (resolve(wtype).bits - 1)) if resolve(wtype).kind == "int" else 0
    t = zero + offset
    calls = re.findall(r"tc::fast_cast_planes<(\d), (\d), 0, false, (\d+)(?:, (\d+))?>", src)
    assert calls and all((int(a), int(b)) == (hi, lo) for a, b, _, _ in calls)
    assert all(int(c or 0) == t for _, _, _, c in calls)  # the zero and offset: one subtraction
    assert "inside the plane sum below" in src
    assert not re.search(r"tc::fast_cast_int<[124], ", src)  # no plane cast of its own


def test_bf16_planes_are_cast_at_once_too():
    src = _source("uint5", 4096, 16, xtype="bfloat16")
    assert "tc::fast_cast_planes<4, 1, 0, true, 32, 16>" in src


def test_the_zeros_per_element_stay_outside_the_planes():
    """(asymmetric weights: f16 zeros per group, subtracted after the sum)"""
    src = _source("uint5", 4096, has_zeros=True)
    assert "tc::fast_cast_planes<4, 1, 0, false, 32>" in src


@pytest.mark.parametrize("M", [1, 16])
def test_a_decode_loop_casts_its_planes_at_once_too(M):
    src = _source("uint5", M, 16)
    assert re.search(r"tc::fast_cast_planes<4, 1, 0, false, \d+, 16>", src)
    assert not re.search(r"tc::fast_cast_int<[14], ", src)


def _plane_add(monkeypatch):
    """The uint5 decode kernel's lowered program, its plans without the plane fusion, and its
    first add of two planes: (add, index, statements, plans, readers, writers)."""
    import tilecraft.block.select as select
    from tilecraft.ir import SeqStmt
    from tilecraft.ir.visitor import walk
    from tilecraft.targets import target_from_arch

    N, K = 256, 1024
    cfg = choose_config(1, N, K, 5, 128, "uint5")
    prog = generate_cuda(qmm_kernel(1, N, K, "uint5", "float16", 128, 16, False, False,
                                    **cfg).func, "sm_90a").state.block_program
    monkeypatch.setattr(select, "_fuse_plane_sums", lambda *a: None)
    plans = select.select_instructions(prog, target_from_arch("sm_90a"))
    readers = select._readers(prog)
    for seq in walk(prog.body):
        if not isinstance(seq, SeqStmt):
            continue
        writers: dict = {}
        for i, s in enumerate(seq.stmts):
            for t in select._writes(s):
                writers.setdefault(t, []).append((i, s))
        for at, s in enumerate(seq.stmts):
            if getattr(s, "op", None) == "+" and getattr(s.out.dtype, "name", "") == "float16":
                return s, at, seq.stmts, plans, readers, writers
    raise AssertionError("no add of planes")


def test_the_rule_refuses_a_plane_read_elsewhere_or_changed_before_the_sum(monkeypatch):
    from tilecraft.block.select_planes import plane_sum

    add, at, stmts, plans, readers, writers = _plane_add(monkeypatch)
    plan = plane_sum(add, at, stmts, plans, readers, writers)
    assert plan is not None and plan.func == "tc::fast_cast_planes<4, 1, 0, false, 32, 16>"
    other = dict(readers)
    other[add.a] = [*readers[add.a], stmts[0]]  # the high plane's product read elsewhere too
    assert plane_sum(add, at, stmts, plans, other, writers) is None
    hi = plan.srcs[0]  # its packed words written again between its cast and the sum
    changed = dict(writers)
    changed[hi] = [*writers[hi], (at - 1, stmts[at - 1])]
    assert plane_sum(add, at, stmts, plans, readers, changed) is None
    assert plane_sum(add, at, stmts, {}, readers, writers) is None  # no fast casts: no sum

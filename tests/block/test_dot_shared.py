"""dot_shared on the block VM: the same bits as `dot` on the same values (shared operands read
through their swizzled layouts, transposed or not, A in registers too); asynchronous ones are
defined once dot_wait_group completes them, and touching what a pending one reads or writes is
TC611 at the line; the verifier's rules; the printed script; wgmma selection."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    DotShared,
    DotWaitGroup,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    StoreShared,
)
from tilecraft.block.select_wgmma import WgmmaPlan, select_dot_shared
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import spatial
from tilecraft.targets import A100_SXM, H100_SXM

from .dot_shared_programs import ACC, Parts, dot_and_dot_shared, inputs
from .programs import here


def _run(program, p: Parts, seed: int = 0) -> list[np.ndarray]:
    args = inputs(p, seed)
    program.run(*args)
    return args


@pytest.mark.parametrize("trans_a, trans_b, a_in_registers",
                         [(False, False, False), (True, False, False), (False, True, False),
                          (True, True, False), (False, False, True), (False, True, True)])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_dot_shared_gives_the_bits_of_dot_on_the_same_values(trans_a, trans_b, a_in_registers,
                                                             asynchronous):
    p, program = dot_and_dot_shared(trans_a, trans_b, a_in_registers, asynchronous)
    *_, c, d = _run(program, p)
    np.testing.assert_array_equal(c.view(np.uint32), d.view(np.uint32))
    a, b = inputs(p)[2:4]
    ref = a.astype(np.float64) @ b.astype(np.float64) + inputs(p)[4]
    assert np.abs(c - ref).max() < 1e-4  # (not just equal: the product)


def test_asynchronous_dot_shared_accumulate_into_a_pending_out_in_order():
    """Two asynchronous dot_shared into acc, one wait: what two dots give."""
    p = Parts()
    body = p.stage() + [p.dot_shared(asynchronous=True), p.dot_shared(asynchronous=True),
                        DotWaitGroup.create(0), p.dot(), p.dot()] + p.store()
    *_, c, d = _run(p.program(body), p)
    np.testing.assert_array_equal(c.view(np.uint32), d.view(np.uint32))


def test_dot_wait_group_completes_all_but_the_newest_n_groups():
    p = Parts()
    other = RegisterTensor.create("other", "float32", ACC)
    second = DotShared.create(p.sa, p.sb, other, asynchronous=True)
    body = p.stage() + [AllocateRegister.create(other, init=0.0), p.dot_shared(asynchronous=True),
                        second, DotWaitGroup.create(1), p.dot()] + p.store()  # reads acc only
    *_, c, d = _run(p.program(body), p)
    np.testing.assert_array_equal(c.view(np.uint32), d.view(np.uint32))


def _pending_error(*after) -> TilecraftError:
    p = Parts()
    body = p.stage() + [p.dot_shared(asynchronous=True)] + [f(p) for f in after]
    with pytest.raises(TilecraftError) as e:
        _run(p.program(body), p)
    return e.value


def test_reading_the_out_of_a_pending_dot_shared_is_tc611_at_the_reader():
    dot_line = here() + 2
    p = Parts()
    body = p.stage() + [DotShared.create(p.sa, p.sb, p.acc, asynchronous=True),
                        StoreGlobal.create(p.acc, p.gc)]  # before dot_wait_group
    line = here() - 1
    with pytest.raises(TilecraftError) as e:
        _run(p.program(body), p)
    assert e.value.code == "TC611" and e.value.span.line == line
    assert f"line {dot_line}" in str(e.value) and "`acc` is read" in str(e.value)


def test_writing_an_operand_of_a_pending_dot_shared_is_tc611_at_the_writer():
    line = here() + 1
    err = _pending_error(lambda p: StoreShared.create(p.tb, p.sb))
    assert err.code == "TC611" and err.span.line == line and "`sb` is written" in str(err)


def test_writing_the_out_of_a_pending_dot_shared_is_tc611():
    line = here() + 1
    err = _pending_error(lambda p: BinaryOp.create("+", p.acc2, 1.0, p.acc))
    assert err.code == "TC611" and err.span.line == line


def test_a_synchronous_dot_shared_on_a_pending_accumulator_is_tc611():
    line = here() + 1
    err = _pending_error(lambda p: DotShared.create(p.sa, p.sb, p.acc))
    assert err.code == "TC611" and err.span.line == line


def test_reading_the_operands_of_a_pending_dot_shared_is_allowed():
    p = Parts()
    body = p.stage() + [p.dot_shared(asynchronous=True),
                        DotShared.create(p.sa, p.sb, p.acc2, asynchronous=True),
                        DotWaitGroup.create(0), StoreGlobal.create(p.acc, p.gc)]
    _run(p.program(body), p)  # no error


# ---- verifier -----------------------------------------------------------------------------------
def test_operands_that_are_not_f16_or_bf16_are_tc603_at_the_line():
    p = Parts()
    f32 = SharedTensor.create("f32", "float32", (64, 32))
    line = here() + 1
    bad = DotShared.create(f32, p.sb, p.acc)
    with pytest.raises(TilecraftError) as e:
        p.program(p.stage() + [AllocateShared.create(f32), bad]).verify()
    assert e.value.code == "TC603" and e.value.span.line == line and "float16" in str(e.value)


def test_shapes_that_do_not_multiply_are_tc603_at_the_line():
    p = Parts()
    line = here() + 1
    bad = DotShared.create(p.sa, p.sb, p.acc, trans_b=True)  # b [32, 64] read as [64, 32]
    with pytest.raises(TilecraftError) as e:
        p.program(p.stage() + [bad]).verify()
    assert e.value.code == "TC603" and e.value.span.line == line and "b[32, 64]^T" in str(e.value)


def test_a_transposed_register_a_is_tc603():
    p = Parts()
    line = here() + 1
    bad = DotShared.create(p.ra, p.sb, p.acc, trans_a=True)
    with pytest.raises(TilecraftError) as e:
        p.program(p.stage() + [bad]).verify()
    assert e.value.code == "TC603" and e.value.span.line == line


def test_dot_wait_group_needs_a_count_of_zero_or_more():
    with pytest.raises(TilecraftError) as e:
        DotWaitGroup.create(-1)
    assert e.value.code == "TC603"


# ---- script and selection -----------------------------------------------------------------------
def test_dot_shared_prints_as_a_line_of_script():
    p, program = dot_and_dot_shared(trans_b=True, asynchronous=True)
    text = str(program)
    assert "dot_shared(sa, sb, acc, out=acc, trans_b=True, asynchronous=True)" in text
    assert "dot_wait_group(0)" in text


def _dot_shared(program) -> DotShared:
    from tilecraft.ir.visitor import walk

    return next(s for s in walk(program.body) if isinstance(s, DotShared))


@pytest.mark.parametrize("trans_a, trans_b, a_in_registers",
                         [(False, False, False), (True, True, False), (False, True, True)])
def test_wgmma_is_selected_on_hopper_only(trans_a, trans_b, a_in_registers):
    _, program = dot_and_dot_shared(trans_a, trans_b, a_in_registers)
    s = _dot_shared(program)
    plan = select_dot_shared(s, 128, H100_SXM)
    assert isinstance(plan, WgmmaPlan) and (plan.gm, plan.gn, plan.tm, plan.nw) == (1, 1, 1, 64)
    assert (plan.a is None) == a_in_registers and plan.trans_b == int(not trans_b)
    assert plan.func == ("tc_wgmma_m64n64k16_f16_rs_t%d" % plan.trans_b if a_in_registers
                         else "tc_wgmma_m64n64k16_f16_t%d%d" % (int(trans_a), plan.trans_b))
    assert select_dot_shared(s, 128, A100_SXM) is None
    assert select_dot_shared(s, 128, None) is None


def test_wgmma_is_not_selected_for_row_major_tiles_or_other_accumulator_layouts():
    p = Parts()
    plain = SharedTensor.create("plain", "float16", (64, 32))  # row-major: no descriptor
    assert select_dot_shared(DotShared.create(plain, p.sb, p.acc), 128, H100_SXM) is None
    other = RegisterTensor.create("o", "float32", spatial(16, 8).local(4, 8))
    assert select_dot_shared(DotShared.create(p.sa, p.sb, other), 128, H100_SXM) is None

"""Located TC6xx diagnostics of block programs: each asserts the code and the user's line."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BinaryOp,
    BlockProgram,
    CopyAsync,
    CopyAsyncCommitGroup,
    CopyAsyncWaitGroup,
    Dot,
    GlobalTensor,
    LoadGlobal,
    LoadShared,
    RegisterTensor,
    SharedTensor,
    StoreShared,
)
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import local, spatial

from .programs import here

LAY = spatial(16, 8).local(1, 4)  # [16, 32] over 128 threads


def _copy_program(*steps) -> tuple[BlockProgram, dict]:
    """Two shared tiles s0, s1 of g; `steps` build the rest from the named tensors."""
    g = GlobalTensor.create("g", "float32", (16, 64))
    s0 = SharedTensor.create("s0", "float32", (16, 32))
    s1 = SharedTensor.create("s1", "float32", (16, 32))
    r = RegisterTensor.create("r", "float32", LAY)
    env = {"g": g, "s0": s0, "s1": s1, "r": r}
    body = [AllocateShared.create(s0), AllocateShared.create(s1), AllocateRegister.create(r)]
    for step in steps:
        body.append(step(env))
    return BlockProgram.create("copies", (g,), (1,), 128, body), env


def _run_expecting(prog: BlockProgram, code: str, line: int) -> TilecraftError:
    with pytest.raises(TilecraftError) as err:
        prog.run(np.ones((16, 64), np.float32))
    assert err.value.code == code
    assert err.value.line == line and err.value.file == __file__
    return err.value


def test_load_shared_before_wait_is_tc605_at_the_load():
    copy_line = here() + 1
    copy = lambda e: CopyAsync.create(e["s0"], e["g"], offset=(0, 0))
    commit = lambda e: CopyAsyncCommitGroup.create()
    line = here() + 1
    load = lambda e: LoadShared.create(e["s0"], e["r"])
    prog, _ = _copy_program(copy, commit, load)
    err = _run_expecting(prog, "TC605", line)
    assert f"line {copy_line}" in err.message and "read" in err.message


def test_wait_group_n_leaves_the_newest_n_groups_pending():
    steps = [lambda e: CopyAsync.create(e["s0"], e["g"], offset=(0, 0)),
             lambda e: CopyAsyncCommitGroup.create(),
             lambda e: CopyAsync.create(e["s1"], e["g"], offset=(0, 32)),
             lambda e: CopyAsyncCommitGroup.create(),
             lambda e: CopyAsyncWaitGroup.create(1),
             lambda e: LoadShared.create(e["s0"], e["r"])]  # the older group is complete
    prog, _ = _copy_program(*steps)
    prog.run(np.ones((16, 64), np.float32))
    line = here() + 1
    store = lambda e: StoreShared.create(e["r"], e["s1"])
    prog, _ = _copy_program(*steps, store)
    _run_expecting(prog, "TC605", line)


def test_an_uncommitted_copy_is_not_waited_for():
    line = here() + 4
    prog, _ = _copy_program(
        lambda e: CopyAsync.create(e["s0"], e["g"], offset=(0, 0)),
        lambda e: CopyAsyncWaitGroup.create(0),
        lambda e: LoadShared.create(e["s0"], e["r"]))
    _run_expecting(prog, "TC605", line)


def test_layout_shape_mismatch_is_tc601_at_the_tensor():
    line = here() + 2
    with pytest.raises(TilecraftError) as err:
        RegisterTensor.create("x", "float16", spatial(32).local(4), shape=(16, 8))
    assert err.value.code == "TC601" and err.value.line == line
    assert "[128]" in err.value.message and "[16, 8]" in err.value.message


def test_layout_over_other_thread_count_is_tc602_at_the_first_use():
    g = GlobalTensor.create("g", "float32", (16, 8))
    x = RegisterTensor.create("x", "float32", local(2, 1).spatial(8, 4).local(1, 2))  # 32 threads
    line = here() + 1
    body = [AllocateRegister.create(x), LoadGlobal.create(g, x)]
    prog = BlockProgram.create("p", (g,), (1,), 128, body)
    with pytest.raises(TilecraftError) as err:
        prog.verify()
    assert err.value.code == "TC602" and err.value.line == line
    assert "32 threads" in err.value.message and "128" in err.value.message


def test_use_before_allocation_is_tc606():
    g = GlobalTensor.create("g", "float32", (16, 32))
    x = RegisterTensor.create("x", "float32", LAY)
    line = here() + 1
    prog = BlockProgram.create("p", (g,), (1,), 128, [LoadGlobal.create(g, x)])
    with pytest.raises(TilecraftError) as err:
        prog.verify()
    assert err.value.code == "TC606" and err.value.line == line


def test_operands_with_different_layouts_are_tc603():
    x = RegisterTensor.create("x", "float32", LAY)
    y = RegisterTensor.create("y", "float32", spatial(8, 16).local(2, 2))
    line = here() + 2
    body = [AllocateRegister.create(x), AllocateRegister.create(y),
            BinaryOp.create("+", x, y, x)]
    with pytest.raises(TilecraftError) as err:
        BlockProgram.create("p", (), (1,), 128, body).verify()
    assert err.value.code == "TC603" and err.value.line == line
    assert "layout" in err.value.message


def test_out_of_another_dtype_is_tc603():
    x = RegisterTensor.create("x", "float16", LAY)
    y = RegisterTensor.create("y", "float32", LAY)
    line = here() + 1
    body = [AllocateRegister.create(x), AllocateRegister.create(y), BinaryOp.create("*", x, 2, y)]
    with pytest.raises(TilecraftError) as err:
        BlockProgram.create("p", (), (1,), 128, body).verify()
    assert err.value.code == "TC603" and err.value.line == line and "float16" in err.value.message


def test_dot_shape_mismatch_is_tc603():
    a = RegisterTensor.create("a", "float16", spatial(16, 8).local(1, 2))  # [16, 16]
    b = RegisterTensor.create("b", "float16", spatial(8, 16).local(1, 2))  # [8, 32]
    c = RegisterTensor.create("c", "float32", spatial(16, 8).local(1, 4))  # [16, 32]
    allocs = [AllocateRegister.create(t) for t in (a, b, c)]
    line = here() + 1
    body = allocs + [Dot.create(a, b, c)]
    with pytest.raises(TilecraftError) as err:
        BlockProgram.create("p", (), (1,), 128, body).verify()
    assert err.value.code == "TC603" and err.value.line == line and "[K, N]" in err.value.message


def test_wrong_number_of_offsets_is_tc603_at_the_instruction():
    g = GlobalTensor.create("g", "float32", (4, 16, 32))
    x = RegisterTensor.create("x", "float32", LAY)
    line = here() + 2
    with pytest.raises(TilecraftError) as err:
        LoadGlobal.create(g, x, offset=(0, 0))
    assert err.value.code == "TC603" and err.value.line == line
    assert "2 offset(s)" in err.value.message and "rank-3" in err.value.message

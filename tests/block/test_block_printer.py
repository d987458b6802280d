"""The Tilus-style printer, and block instructions as ordinary Tile IR statements."""

from __future__ import annotations

from tilecraft.block import (
    AllocateRegister,
    BinaryOp,
    BlockProgram,
    Dot,
    GlobalTensor,
    LoadGlobal,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    View,
)
from tilecraft.ir import SeqStmt
from tilecraft.ir.visitor import walk
from tilecraft.layout import spatial

from .programs import A_TILE, ACC, matmul


def test_matmul_prints_like_figure_2():
    text = str(matmul(128, 16, 64))
    lines = [ln.strip() for ln in text.splitlines()]
    assert text.startswith("def matmul<2, 2>(a: global float16[128, 64], b: global "
                           "float16[64, 16], c: global float16[128, 16]):  # 128 threads")
    assert "bi, bj = block_indices()" in lines
    assert ("acc = allocate_register(float32[64, 8], layout=spatial(4, 1).local(2, 1)"
            ".spatial(8, 4).local(1, 2), init=0.0)") in lines
    assert "for bk in range(4):" in lines
    assert "load_global(a, offset=[bi * 64, bk * 16], out=ta)" in lines
    assert "dot(ta, tb, acc, out=acc)" in lines
    assert "cast(acc, out=tc)" in lines
    assert lines[-1] == "store_global(tc, c, offset=[bi * 64, bj * 8])"
    assert "    for bk in range(4):\n        load_global(a" in text  # the loop body is indented


def test_shared_layouts_print_compactly():
    text = str(matmul(128, 16, 64, shared=True))
    assert "sb = allocate_shared(float16[16, 8], layout=row_major(16, 8))" in text
    assert "layout=row_major(64, 16).with_swizzle(Swizzle(1, 3, 3))" in text
    assert "copy_async_wait_group(0)" in text and "load_shared(sa, offset=[0, 0], out=ta)" in text


def test_scalar_operands_and_non_default_dims_print():
    g = GlobalTensor.create("g", "float32", (4, 16, 32))
    x = RegisterTensor.create("x", "float32", spatial(32).local(4))
    prog = BlockProgram.create("p", (g,), (4,), 128, [])
    (bi,) = prog.block_vars
    col = RegisterTensor.create("col", "float32", spatial(16).replicate(2))
    body = [AllocateRegister.create(x), LoadGlobal.create(g, x, offset=(bi, 3, 0), dims=(2,)),
            BinaryOp.create("max", x, 0.0, x), AllocateRegister.create(col),
            LoadGlobal.create(g, col, offset=(bi, 0, 5), dims=(1,))]
    text = str(BlockProgram.create("p", (g,), (4,), 32, body, block_vars=(bi,)))
    assert "load_global(g, offset=[bi, 3, 0], out=x)" in text
    assert "max(x, 0.0, out=x)" in text
    assert "load_global(g, offset=[bi, 0, 5], dims=[1], out=col)" in text


def test_instructions_are_leaf_statements_with_access_sets():
    prog = matmul(128, 16, 64)
    found = [s for s in walk(prog.body) if isinstance(s, Dot)]
    assert len(found) == 1
    dot = found[0]
    assert [t.name for t in dot.reads()] == ["ta", "tb", "acc"]
    assert [t.name for t in dot.writes()] == ["acc"]
    load = next(s for s in walk(prog.body) if isinstance(s, LoadGlobal))
    assert [str(e) for e in load.exprs()] == ["bi * 64", "bk * 16"]
    assert isinstance(SeqStmt.create([load, dot]), SeqStmt)


def test_tensor_and_instruction_equality_agree_with_hashing():
    x = RegisterTensor.create("x", "float16", A_TILE)
    same = RegisterTensor(x.buffer, A_TILE)
    other = RegisterTensor.create("x", "float16", A_TILE)
    assert x == same and hash(x) == hash(same) and x != other
    y = RegisterTensor.create("y", "float32", ACC)
    v1, v2 = View.create(x, y), View.create(x, y)
    assert v1 == v2 and hash(v1) == hash(v2)  # spans do not take part
    s = SharedTensor.create("s", "float16", (8, 8))
    assert {s: 1}[SharedTensor(s.buffer, s.layout)] == 1
    g = GlobalTensor.create("g", "float32", (8,))
    assert StoreGlobal.create(y, g) != StoreGlobal.create(y, g, offset=(1,))

"""Block VM semantics: reductions, element-wise ops, views, replicas and per-thread storage."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.block import (
    AllocateGlobal,
    AllocateRegister,
    BinaryOp,
    BlockProgram,
    Exit,
    Fill,
    GlobalTensor,
    LoadGlobal,
    Print,
    ReduceRegister,
    RegisterTensor,
    StoreGlobal,
    UnaryOp,
    View,
    ViewGlobal,
)
from tilecraft.block.vm import BlockVM, run
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import Compare, If, Var
from tilecraft.layout import local, replicate, spatial

from .programs import here

ROWS = spatial(16, 8).local(1, 4)  # a [16, 32] tile over 128 threads, 4 elements each


def _load_reduce_store(kind: str, src_dtype: str, out_dtype: str) -> BlockProgram:
    gx = GlobalTensor.create("x", src_dtype, (16, 32))
    gy = GlobalTensor.create("y", out_dtype, (16,))
    x = RegisterTensor.create("x_r", src_dtype, ROWS)
    y = RegisterTensor.create("y_r", out_dtype, ROWS.reduce(1, keepdim=False))
    body = [AllocateRegister.create(x), LoadGlobal.create(gx, x),
            AllocateRegister.create(y), ReduceRegister.create(x, y, dim=1, kind=kind),
            StoreGlobal.create(y, gy)]
    return BlockProgram.create("reduce", (gx, gy), (1,), 128, body)


@pytest.mark.parametrize("kind", ["sum", "abssum", "max", "absmax", "min"])
def test_reduce_matches_numpy_in_the_accumulator_dtype(kind):
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float16)
    y = np.full(16, np.nan, np.float32)
    _load_reduce_store(kind, "float16", "float32").run(x, y)
    v = np.abs(x.astype(np.float64)) if kind.startswith("abs") else x.astype(np.float64)
    ref = {"sum": v.sum(1), "abssum": v.sum(1), "max": v.max(1), "absmax": v.max(1),
           "min": v.min(1)}[kind]
    np.testing.assert_allclose(y, ref.astype(np.float32), rtol=1e-6)


def test_integer_sum_wraps_in_the_wider_type():
    x = np.full((16, 32), 100, np.int8)
    y = np.zeros(16, np.int32)
    _load_reduce_store("sum", "int8", "int32").run(x, y)
    assert (y == 3200).all()


def test_elementwise_ops_mean_what_the_tile_ir_means():
    """exp(x * 0.5) - 1 in float16, per element, and integer `/` truncating toward zero."""
    gx = GlobalTensor.create("x", "float16", (16, 32))
    gy = GlobalTensor.create("y", "float16", (16, 32))
    gi = GlobalTensor.create("i", "int32", (16, 32))
    x, t, y = (RegisterTensor.create(n, "float16", ROWS) for n in ("xr", "t", "yr"))
    i = RegisterTensor.create("ir", "int32", ROWS)
    body = [AllocateRegister.create(x), AllocateRegister.create(t), AllocateRegister.create(y),
            AllocateRegister.create(i), LoadGlobal.create(gx, x),
            BinaryOp.create("*", x, 0.5, t), UnaryOp.create("exp", t, t),
            BinaryOp.create("-", t, 1, y), StoreGlobal.create(y, gy),
            LoadGlobal.create(gi, i), BinaryOp.create("/", i, -3, i), StoreGlobal.create(i, gi)]
    xv = np.random.default_rng(2).standard_normal((16, 32)).astype(np.float16)
    yv = np.zeros_like(xv)
    iv = np.arange(-256, 256, dtype=np.int32).reshape(16, 32)
    BlockProgram.create("ew", (gx, gy, gi), (1,), 128, body).run(xv, yv, iv.copy())
    half = (xv * np.float16(0.5)).astype(np.float16)
    ref = (np.exp(half.astype(np.float32)).astype(np.float16) - np.float16(1)).astype(np.float16)
    np.testing.assert_array_equal(yv, ref)


def _view_program(out_layout, out_dtype: str, back: bool = True):
    """Load f16 [16, 16] as spatial(16, 8).local(1, 2) (32 bits per thread), view it, store."""
    src_layout = spatial(16, 8).local(1, 2)
    gx = GlobalTensor.create("x", "float16", (16, 16))
    gu = GlobalTensor.create("u", out_dtype, out_layout.shape)
    gy = GlobalTensor.create("y", "float16", (16, 16))
    x = RegisterTensor.create("xr", "float16", src_layout)
    u = RegisterTensor.create("ur", out_dtype, out_layout)
    y = RegisterTensor.create("yr", "float16", src_layout)
    body = [AllocateRegister.create(x), AllocateRegister.create(u), AllocateRegister.create(y),
            LoadGlobal.create(gx, x)]
    line = here() + 1
    body += [View.create(x, u), StoreGlobal.create(u, gu)]
    if back:
        body += [View.create(u, y), StoreGlobal.create(y, gy)]
    return BlockProgram.create("view", (gx, gu, gy), (1,), 128, body), line


def test_view_as_uint32_and_back_is_the_identity():
    prog, _ = _view_program(spatial(128), "uint32")
    x = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float16)
    u = np.zeros(128, np.uint32)
    y = np.zeros_like(x)
    prog.run(x, u, y)
    np.testing.assert_array_equal(u, x.reshape(-1).view(np.uint32))  # thread t: a pair of halves
    assert y.tobytes() == x.tobytes()


def test_view_with_other_bits_per_thread_is_tc604_at_its_line():
    prog, line = _view_program(spatial(128).local(2), "uint32", back=False)
    with pytest.raises(TilecraftError) as err:
        prog.run(np.zeros((16, 16), np.float16), np.zeros(256, np.uint32),
                 np.zeros((16, 16), np.float16))
    assert err.value.code == "TC604" and err.value.line == line
    assert "32 bits" in err.value.message and "64 bits" in err.value.message


def test_replicas_hold_the_same_values_after_load_global():
    g = GlobalTensor.create("g", "float32", (16, 8))
    b = RegisterTensor.create("b", "float32",
                              replicate(4, 2) * local(2, 1).column_spatial(4, 8).local(2, 1))
    prog = BlockProgram.create("rep", (g,), (1,), 128,
                               [AllocateRegister.create(b), LoadGlobal.create(g, b)])
    data = np.arange(128, dtype=np.float32).reshape(16, 8)
    vm = run(prog, [data])
    store = vm.regs[b]
    assert store.shape == (128, 4)
    for t in range(128):  # warp w's lane l holds what lane l of warp 0 holds
        np.testing.assert_array_equal(store[t], store[t % 32])
    for t in range(32):  # and each thread holds its layout's elements
        for i in range(4):
            assert store[t, i] == data[b.layout.map(t, i)]


def test_a_view_that_breaks_replicas_is_tc607_when_stored():
    g = GlobalTensor.create("g", "float16", (128,))
    out = GlobalTensor.create("o", "float16", (32,))
    x = RegisterTensor.create("x", "float16", spatial(128))
    r = RegisterTensor.create("r", "float16", replicate(4) * spatial(32))
    line = here() + 2
    body = [AllocateRegister.create(x), AllocateRegister.create(r), LoadGlobal.create(g, x),
            View.create(x, r), StoreGlobal.create(r, out)]
    with pytest.raises(TilecraftError) as err:
        BlockProgram.create("p", (g, out), (1,), 128, body).run(
            np.arange(128, dtype=np.float16), np.zeros(32, np.float16))
    assert err.value.code == "TC607" and err.value.line == line


def test_exit_stops_only_its_block():
    g = GlobalTensor.create("g", "int32", (4, 128))
    x = RegisterTensor.create("x", "int32", spatial(128))
    prog = BlockProgram.create("p", (g,), (4,), 128, [])
    (bi,) = prog.block_vars
    body = [AllocateRegister.create(x), Fill.create(x, bi + 1),
            If(Compare.create("==", bi, 2), Exit.create()),
            StoreGlobal.create(x, g, offset=(bi, 0))]
    out = np.zeros((4, 128), np.int32)
    BlockProgram.create("p", (g,), (4,), 128, body, block_vars=(bi,)).run(out)
    assert out[:, 0].tolist() == [1, 2, 0, 4]


def test_scalar_parameters_and_partial_tiles():
    """A scalar parameter in an operand; a tile past the tensor's end reads 0, stores drop."""
    gx = GlobalTensor.create("x", "float32", (100,))
    s = Var.create("s", "float32")
    x = RegisterTensor.create("xr", "float32", spatial(128))
    prog = BlockProgram.create("p", (gx, s), (1,), 128, [
        AllocateRegister.create(x), LoadGlobal.create(gx, x, offset=(0,)),
        BinaryOp.create("+", x, s, x), StoreGlobal.create(x, gx)])
    data = np.arange(100, dtype=np.float32)
    prog.run(data, 0.5)
    np.testing.assert_array_equal(data, np.arange(100, dtype=np.float32) + 0.5)


def test_vm_is_a_block_vm_subclass_of_the_interpreter_machine():
    from tilecraft.interp.machine import Machine

    assert issubclass(BlockVM, Machine)


def test_dims_choose_the_dimensions_a_tile_covers():
    g = GlobalTensor.create("g", "float32", (4, 16, 32))
    o = GlobalTensor.create("o", "float32", (16,))
    col = RegisterTensor.create("col", "float32", spatial(16).replicate(8))
    body = [AllocateRegister.create(col), LoadGlobal.create(g, col, offset=(2, 0, 5), dims=(1,)),
            StoreGlobal.create(col, o)]
    data = np.random.default_rng(4).standard_normal((4, 16, 32)).astype(np.float32)
    out = np.zeros(16, np.float32)
    BlockProgram.create("p", (g, o), (1,), 128, body).run(data, out)
    np.testing.assert_array_equal(out, data[2, :, 5])


def test_a_workspace_is_zeroed_once_and_shared_by_the_blocks():
    ws = GlobalTensor.create("ws", "int32", (128,))
    x = RegisterTensor.create("x", "int32", spatial(128))
    body = [AllocateGlobal.create(ws), AllocateRegister.create(x), LoadGlobal.create(ws, x),
            BinaryOp.create("+", x, 1, x), StoreGlobal.create(x, ws)]
    vm = run(BlockProgram.create("p", (), (3,), 128, body), [])
    assert (vm.buffers[ws.buffer] == 3).all()


def test_view_global_reinterprets_the_bytes():
    g = GlobalTensor.create("g", "float16", (8, 16))
    u = GlobalTensor.create("u", "uint32", (8, 8))
    o = GlobalTensor.create("o", "uint32", (8, 8))
    r = RegisterTensor.create("r", "uint32", spatial(8, 8).replicate(2))
    body = [ViewGlobal.create(g, u), AllocateRegister.create(r), LoadGlobal.create(u, r),
            StoreGlobal.create(r, o)]
    x = np.random.default_rng(5).standard_normal((8, 16)).astype(np.float16)
    out = np.zeros((8, 8), np.uint32)
    BlockProgram.create("p", (g, o), (1,), 128, body).run(x, out)
    np.testing.assert_array_equal(out, x.view(np.uint32))


def test_print_shows_the_logical_tensor(capsys):
    x = RegisterTensor.create("x", "int32", spatial(4, 32))
    prog = BlockProgram.create("p", (), (1,), 128, [
        AllocateRegister.create(x), Fill.create(x, 7), Print.create(x, msg="after fill")])
    prog.run()
    text = capsys.readouterr().out
    assert text.startswith("[block (0,)] after fill x (int32[4, 32]):\n[[7 7 7")


@pytest.mark.parametrize("dtype,want", [("int32", -1), ("uint8", 255), ("float32", np.nan)])
def test_uninitialised_registers_and_shared_memory_read_as_poison(dtype, want):
    """NaN for floats, every bit set for integers: a read before any write cannot pass for the
    zero it may have meant (the row index a producer role read before the consumers stored
    it: tests/passes/test_warp_specialize_body.py)."""
    from tilecraft.block import AllocateShared, LoadShared, SharedTensor

    g = GlobalTensor.create("g", dtype, (16, 32))
    h = GlobalTensor.create("h", dtype, (16, 32))
    s = SharedTensor.create("s", dtype, (16, 32))
    r = RegisterTensor.create("r", dtype, ROWS)
    u = RegisterTensor.create("u", dtype, ROWS)
    prog = BlockProgram.create("poison", (g, h), (1,), 128, [
        AllocateShared.create(s), AllocateRegister.create(r), LoadShared.create(s, r),
        StoreGlobal.create(r, g), AllocateRegister.create(u), StoreGlobal.create(u, h)])
    out = [np.zeros((16, 32), dtype=dtype) for _ in range(2)]
    run(prog, out)
    for o in out:
        np.testing.assert_array_equal(o, np.full((16, 32), want, dtype=dtype))

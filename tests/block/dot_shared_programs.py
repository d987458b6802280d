"""Block programs with `dot_shared` (wgmma's instruction), built in Python: C (+)= A @ B on one
64 x 64 x 32 tile, operands staged into swizzled shared memory, and the same product as a
register `dot` for comparison."""

from __future__ import annotations

import numpy as np

from tilecraft.block import (
    AllocateRegister,
    AllocateShared,
    BlockProgram,
    Dot,
    DotShared,
    DotWaitGroup,
    GlobalTensor,
    LoadGlobal,
    RegisterTensor,
    SharedTensor,
    StoreGlobal,
    StoreShared,
)
from tilecraft.layout import make_swizzled_layout, spatial
from tilecraft.passes.layout_inference.rules_gemm import a_layout, wgmma_c_layout

M, N, K = 64, 64, 32
THREADS = 128
ACC = wgmma_c_layout(M, N, 1, 1)  # one warpgroup
A_REG = a_layout(M, K, 4)  # mma.sync's A layout over 4 warps (wgmma's register A)
MOVE = {(64, 32): spatial(32, 4).local(2, 8), (32, 64): spatial(16, 8).local(2, 8)}


class Parts:
    """Global tensors and the instructions that put them in registers and shared memory."""

    def __init__(self, trans_a: bool = False, trans_b: bool = False):
        self.trans_a, self.trans_b = trans_a, trans_b
        sa_shape = (K, M) if trans_a else (M, K)
        sb_shape = (N, K) if trans_b else (K, N)
        self.ga = GlobalTensor.create("a", "float16", sa_shape)  # as stored in shared memory
        self.gb = GlobalTensor.create("b", "float16", sb_shape)
        self.ga_l = GlobalTensor.create("a_logical", "float16", (M, K))  # op(a), for `dot`
        self.gb_l = GlobalTensor.create("b_logical", "float16", (K, N))
        self.gc = GlobalTensor.create("c", "float32", (M, N))
        self.gd = GlobalTensor.create("d", "float32", (M, N))
        self.sa = SharedTensor.create("sa", "float16", sa_shape,
                                      make_swizzled_layout(sa_shape, 16))
        self.sb = SharedTensor.create("sb", "float16", sb_shape,
                                      make_swizzled_layout(sb_shape, 16))
        self.ta = RegisterTensor.create("ta", "float16", MOVE[sa_shape])
        self.tb = RegisterTensor.create("tb", "float16", MOVE[sb_shape])
        self.ra = RegisterTensor.create("ra", "float16", A_REG)  # op(a) in registers
        self.rb = RegisterTensor.create("rb", "float16", MOVE[(K, N)])
        self.acc = RegisterTensor.create("acc", "float32", ACC)
        self.acc2 = RegisterTensor.create("acc2", "float32", ACC)

    @property
    def params(self):
        return (self.ga, self.gb, self.ga_l, self.gb_l, self.gc, self.gd)

    def stage(self) -> list:
        """a, b into shared memory; op(a), op(b) into registers; c into acc and acc2."""
        out = [AllocateShared.create(self.sa), AllocateShared.create(self.sb)]
        for t in (self.ta, self.tb, self.ra, self.rb, self.acc, self.acc2):
            out.append(AllocateRegister.create(t))
        out += [LoadGlobal.create(self.ga, self.ta), StoreShared.create(self.ta, self.sa),
                LoadGlobal.create(self.gb, self.tb), StoreShared.create(self.tb, self.sb),
                LoadGlobal.create(self.ga_l, self.ra), LoadGlobal.create(self.gb_l, self.rb),
                LoadGlobal.create(self.gc, self.acc), LoadGlobal.create(self.gc, self.acc2)]
        return out

    def dot_shared(self, a_in_registers: bool = False, **kw) -> DotShared:
        a = self.ra if a_in_registers else self.sa
        return DotShared.create(a, self.sb, self.acc, trans_a=self.trans_a and not a_in_registers,
                                trans_b=self.trans_b, **kw)

    def dot(self) -> Dot:
        return Dot.create(self.ra, self.rb, self.acc2)

    def store(self) -> list:
        """acc -> c, acc2 -> d."""
        return [StoreGlobal.create(self.acc, self.gc), StoreGlobal.create(self.acc2, self.gd)]

    def program(self, body: list, name: str = "dot_shared") -> BlockProgram:
        return BlockProgram.create(name, self.params, (1,), THREADS, body)


def inputs(p: Parts, seed: int = 0) -> list[np.ndarray]:
    """Random a, b (as stored and logical) and c; d a copy of c (what `dot` starts from)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    stored_a = np.ascontiguousarray(a.T) if p.trans_a else a
    stored_b = np.ascontiguousarray(b.T) if p.trans_b else b
    return [stored_a, stored_b, a, b, c, c.copy()]


def dot_and_dot_shared(trans_a=False, trans_b=False, a_in_registers=False,
                       asynchronous=False) -> tuple[Parts, BlockProgram]:
    """c = dot_shared(a, b, c) and d = dot(a, b, d) with c == d at the start."""
    p = Parts(trans_a, trans_b)
    body = p.stage() + [p.dot_shared(a_in_registers, asynchronous=asynchronous)]
    if asynchronous:
        body.append(DotWaitGroup.create(0))
    body += [p.dot()] + p.store()
    return p, p.program(body)


def dot_shared_only(trans_a=False, trans_b=False, a_in_registers=False,
                    asynchronous=False) -> tuple[Parts, BlockProgram]:
    """c = dot_shared(a, b, c) alone (d is left as it is)."""
    p = Parts(trans_a, trans_b)
    body = p.stage() + [p.dot_shared(a_in_registers, asynchronous=asynchronous)]
    if asynchronous:
        body.append(DotWaitGroup.create(0))
    return p, p.program(body + [StoreGlobal.create(p.acc, p.gc)])

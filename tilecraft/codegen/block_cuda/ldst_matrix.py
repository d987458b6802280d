"""ldmatrix / stmatrix as CUDA: a load_shared or store_shared with a `MatrixPlan`
(block/ldst_matrix.py), and the moves of the operand blocks of a dot from shared memory
(block/ldmatrix.py, through mma.py). A mixin of `BlockPrinter` (through mma.py).

Lane l of a move supplies the shared address of the element the plan names (a register of a
thread of its warp), printed through the transfer's layouts as any load is; a move relative to
the plan's base prints `(row ^ X) + Y` of the base's address, declared once:

    {  // load_shared as 2 x ldmatrix (layout division)
      const int a_row = <the first move's lane address>;
      tc::ldmatrix_x4(reinterpret_cast<tc::u32*>(&a_[0]), &A_s_[a_row]);
      tc::ldmatrix_x4(reinterpret_cast<tc::u32*>(&a_[8]), &A_s_[(a_row ^ 16) + 512]);
    }
"""

from __future__ import annotations

from tilecraft.block.ldmatrix import LaneTerm, MatrixMove

from ..cuda.indexing import frag_coords


def _lane(t: LaneTerm) -> str:
    """`(lane / div % mod) * mul` with lane = tid % 32 (folded when div * mod divides 32)."""
    lane = "tid" if 32 % (t.div * t.mod) == 0 else "(tid % 32)"
    e = lane if t.div == 1 else f"{lane} / {t.div}"
    e = f"({e} % {t.mod})"
    return e if t.mul == 1 else f"{e} * {t.mul}"


class MatrixPrinter:
    def matrix_transfer(self, s) -> bool:
        """`s` (load_shared / store_shared) as its MatrixPlan's moves; False without one."""
        from tilecraft.block.ldst_matrix import MatrixPlan

        plan = self.plans.get(id(s))
        if not isinstance(plan, MatrixPlan):
            return False
        tile = s.tile
        op = plan.moves[0].OP
        self.open("")
        self.w(f"// {s.NAME} as {len(plan.moves)} x {op} (layout division)")
        bases = {}
        if plan.base is not None:
            bases[tile] = plan.base
            self.w(f"const int {self.tensor(tile)}row = {self.lane_address(plan.base, s, tile)};"
                   f"  // this lane's {op} row; the others: (row ^ X) + Y")
        for x in plan.moves:
            self.move_matrices(x, s, tile, bases)
        self.close()
        return True

    def lane_address(self, x: MatrixMove, s, tile) -> str:
        """Lane l's row address (element offset): the shared offset of the element its holder
        thread has in the register the plan names (through the tile's layout, the transfer's
        offset, the shared layout and its swizzle)."""
        thread = f"(tid / 32 * 32 + {' + '.join(_lane(t) for t in x.lane_thread)})"
        reg = " + ".join([str(x.regs[0])] + [_lane(t) for t in x.lane_register])
        coords = frag_coords(tile.layout, thread, f"({reg})")
        return self.shared_offset(s, s.whole, self.tile_index(s, coords))

    def move_matrices(self, x: MatrixMove, s, tile, bases: dict | None = None) -> None:
        """One ldmatrix / stmatrix: registers of `x.operand` <-> the shared tensor of `s` (a
        load_shared or store_shared, `tile` the register tensor it moves)."""
        if x.xor is not None and x.operand in (bases or {}):
            off = f"{self.tensor(x.operand)}row"
            off = f"({off} ^ {x.xor})" if x.xor else off
            off = f"{off} + {x.add}" if x.add else off
        else:
            off = self.lane_address(x, s, tile)
        addr = f"&{self.tensor(s.whole)}[{off}]"
        regs = self.tensor(x.operand)
        r0, num = x.regs[0], len(x.regs)
        store = x.OP == "stmatrix"
        if x.regs == tuple(r0 + 2 * q for q in range(num)):
            ptr = f"reinterpret_cast<{'const ' if store else ''}tc::u32*>(&{regs}[{r0}])"
            self.w(f"{x.func}({addr}, {ptr});" if store else f"{x.func}({ptr}, {addr});")
            return
        self.open("")
        words = [f"reinterpret_cast<tc::u32*>({regs})[{r // 2}]" for r in x.regs]
        if store:
            self.w(f"const tc::u32 m[{num}] = {{{', '.join(words)}}};")
            self.w(f"{x.func}({addr}, m);")
        else:
            self.w(f"tc::u32 m[{num}];")
            self.w(f"{x.func}(m, {addr});")
            for q, w in enumerate(words):
                self.w(f"{w} = m[{q}];")
        self.close()

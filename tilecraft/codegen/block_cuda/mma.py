"""`dot` on mma.sync as CUDA, from its selection plan (block/select.py `MmaPlan`,
`FromSharedPlan`; block/ldmatrix.py). A mixin of `BlockPrinter` (through compute.py).

With operands in registers: the plan's steps, one mma per (C, A, B) register block triple.
With operands from shared memory: the operands' register arrays are declared here (their
allocations and loads are fused into the dot), and k step by k step the plan's loads fill the
blocks the step needs (`ldmatrix`, or element by element), `ahead` k steps before that step's
mmas. The ldmatrix moves and their lane addresses are printed by ldst_matrix.py.
"""

from __future__ import annotations

from tilecraft.block import Dot
from tilecraft.block.ldmatrix import Ldmatrix, ScalarBlock

from ..cuda.cexpr import ctype
from ..cuda.indexing import frag_coords
from .ldst_matrix import MatrixPrinter


class MmaPrinter(MatrixPrinter):
    def mma(self, s: Dot, plan) -> None:
        """The plan's mma.sync steps on the operands' register blocks."""
        self.w(f"// dot {s.a.buffer.name} @ {s.b.buffer.name}: {len(plan.steps)} x "
               f"{plan.atom.name} (layout division)")
        self.copy_accumulator(s)
        for step in plan.steps:
            self.mma_step(s, plan, step)

    def copy_accumulator(self, s: Dot) -> None:
        c, out = self.tensor(s.c), self.tensor(s.out)
        if out != c:
            self.per_register(s.out)
            self.w(f"{out}[li] = {c}[li];")
            self.close()

    def mma_step(self, s: Dot, plan, step: tuple[int, int, int]) -> None:
        lc, la, lb = step
        atom = plan.atom
        na, nb, nc = atom.a.local_size, atom.b.local_size, atom.c.local_size
        a, b, out = (self.tensor(t) for t in (s.a, s.b, s.out))
        self.w(f"{plan.func}(&{out}[{lc * nc}], reinterpret_cast<const tc::u32*>(&{a}[{la * na}]),"
               f" reinterpret_cast<const tc::u32*>(&{b}[{lb * nb}]), &{out}[{lc * nc}]);")

    def mma_from_shared(self, s: Dot, plan) -> None:
        """FromSharedPlan: operand blocks loaded per k step (ldmatrix or scalar), then mmas."""
        mma, steps = plan.mma, plan.ksteps
        kinds = {"ldmatrix" if isinstance(x, Ldmatrix) else "scalar loads"
                 for k in steps for x in k.loads}
        self.w(f"// dot {s.a.buffer.name} @ {s.b.buffer.name}: {len(mma.steps)} x "
               f"{mma.atom.name} (layout division), operands from shared memory in "
               f"{len(steps)} k steps ({', '.join(sorted(kinds))}, {plan.ahead} k step ahead)")
        self.copy_accumulator(s)
        self.open("")
        for t in plan.tiles:
            self.w(f"__align__(16) {ctype(t.dtype)} {self.tensor(t)}[{t.layout.local_size}];  "
                   f"// {t.buffer.name}: blocks loaded per k step")
        for op, base in plan.bases.items():
            self.w(f"const int {self.tensor(op)}row = "
                   f"{self.lane_address(base, plan.loads[op], plan.tiles[op])};  "
                   "// this lane's ldmatrix row; the others: (row ^ X) + Y")
        ahead = max(plan.ahead, 0)
        for k in range(min(ahead, len(steps))):
            self.k_loads(plan, k)
        for k, kstep in enumerate(steps):
            if not ahead or k + ahead < len(steps):
                self.k_loads(plan, k + ahead)
            self.w(f"// k step {k}: {len(kstep.mmas)} mma")
            for step in kstep.mmas:
                self.mma_step(s, mma, step)
        self.close()

    def k_loads(self, plan, k: int) -> None:
        self.w(f"// k step {k}: operand blocks")
        for x in plan.ksteps[k].loads:
            load, tile = plan.loads[x.operand], plan.tiles[x.operand]
            if isinstance(x, ScalarBlock):
                self.scalar_block(x, load, tile)
            else:
                self.move_matrices(x, load, tile, plan.bases)

    def scalar_block(self, x: ScalarBlock, load, tile) -> None:
        dst, src = self.tensor(x.operand), self.tensor(load.src)
        for i in range(x.block * x.size, (x.block + 1) * x.size):
            coords = frag_coords(tile.layout, "tid", str(i))
            off = self.shared_offset(load, load.src, self.tile_index(load, coords))
            self.w(f"{dst}[{i}] = {src}[{off}];")

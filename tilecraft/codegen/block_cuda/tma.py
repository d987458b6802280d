"""Bulk copies and mbarriers of block programs as CUDA (block/mbarrier.py): TMA loads by
thread 0 on the plan block/select_tma.py chose, mbarrier init/arrive/wait. A mixin of
`BlockPrinter` (printer.py); the tensor maps the loads use become kernel parameters
(`tensor_maps`: name -> (tensor, box, swizzle bytes, split), made by the runtime at launch).
"""

from __future__ import annotations

from tilecraft.block import (
    CopyAsyncBulk,
    MbarrierArrive,
    MbarrierExpect,
    MbarrierInit,
    MbarrierWait,
)


class TmaPrinter:
    def bar(self, bars, index) -> str:
        return f"&{self.tensor(bars)}[{self.p(index)}]"

    def _MbarrierInit(self, s: MbarrierInit) -> None:
        n = int(s.bars.shape[0])
        self.open("if (tid == 0)")
        self.w("#pragma unroll")
        self.w(f"for (int s = 0; s < {n}; ++s) tc::mbarrier_init(&{self.tensor(s.bars)}[s], "
               f"{s.arrivals});")
        self.w("tc::fence_mbarrier_init();")
        self.close()
        self.w("tc::fence_proxy_async_shared();  // earlier generic accesses before TMA writes")

    def _MbarrierExpect(self, s: MbarrierExpect) -> None:
        self.w(f"if (tid == 0) tc::mbarrier_arrive_expect_tx({self.bar(s.bars, s.index)}, "
               f"{s.nbytes});")

    def _MbarrierWait(self, s: MbarrierWait) -> None:
        guard = "if (tid == 0) " if s.issuer else ""  # (thread 0 issues the bulk copies)
        self.w(f"{guard}tc::mbarrier_wait({self.bar(s.bars, s.index)}, {self.p(s.phase)});")

    def _MbarrierArrive(self, s: MbarrierArrive) -> None:
        if self.role == "producer":  # its shared stores, before the consumers' wgmma reads them
            self.w("tc::fence_proxy_async_shared();")
            self.w("__syncwarp();  // every lane's stores before lane 0 arrives")
        else:  # (a stage the lanes read by ld.shared or ldmatrix: every lane's reads first)
            self.w("__syncwarp();  // every lane is done with the stage before lane 0 arrives")
        self.w(f"if (tid % 32 == 0) tc::mbarrier_arrive({self.bar(s.bars, s.index)});  "
               "// one arrival per warp")

    def _CopyAsyncBulk(self, s: CopyAsyncBulk) -> None:
        plan = self.plans.get(id(s))
        if plan is None:
            raise self.refuse(s, "a copy_async_bulk that is not a TMA load (no plan)")
        name = self.tensor_map(s, plan)
        starts = [self.p(o) for o in s.offset]
        dst = self.tensor(s.dst)
        if plan.split:  # one box: (column block, the other dims..., the block's columns)
            coords = ["0"] + [f"(int)({starts[d]})" for d in reversed(range(len(starts)))
                              if d != plan.col_dim]
            coords.append(f"(int)(({starts[plan.col_dim]}) / {plan.split})")
            self.w(f"// copy_async_bulk {s.src.name} -> {s.dst.name}: 1 TMA box of "
                   f"{plan.cols // plan.block} column blocks of {plan.rows}x{plan.block}")
            self.w(f"if (tid == 0) tc::tma_load({dst}, {name}, {self.bar(s.bars, s.index)}, "
                   f"{', '.join(coords)});")
            return
        self.w(f"// copy_async_bulk {s.src.name} -> {s.dst.name}: {plan.cols // plan.block} "
               f"TMA box(es) of {plan.rows}x{plan.block}")
        self.open("if (tid == 0)")
        for j in range(plan.cols // plan.block):
            coords = []
            for d in reversed(range(len(starts))):  # innermost first
                c = starts[d]
                if d == plan.col_dim and j:
                    c = f"{c} + {j * plan.block}"
                coords.append(f"(int)({c})")
            addr = f"{dst} + {j * plan.rows * plan.block}" if j else dst
            self.w(f"tc::tma_load({addr}, {name}, {self.bar(s.bars, s.index)}, "
                   f"{', '.join(coords)});")
        self.close()

    def tensor_map(self, s: CopyAsyncBulk, plan) -> str:
        """The kernel parameter holding the map of this (tensor, box, swizzle), added once."""
        key = (plan.tensor, plan.box, plan.swizzle, plan.split)
        for name, k in self.tensor_maps.items():
            if k == key:
                return name
        name = f"{self.tensor(s.src)}tmap{len(self.tensor_maps)}"
        self.tensor_maps[name] = key
        return name

"""`cumsum` of block programs as CUDA: T.cumsum's inclusive prefix sums along one dimension
(reverse: from the end), with the interpreter's arithmetic: the sum
runs in float (double for float64 tiles, 64-bit integers for integer tiles) and is rounded once
per stored element. A mixin of `BlockPrinter` (printer.py).

Who scans is what the layouts allow:

* every thread holds whole rows along `dim` (no thread mode in it) and out has src's layout:
  each thread scans its own registers in straight-line code (no memory, no barrier);

      cumsum(S, out=D, dim=1)  ->  acc = 0.f;  // a row of 4 registers
      layout (.., local(1, 4))      acc += S_[0]; D_[0] = acc;  acc += S_[1]; D_[1] = acc; ..

* otherwise (a memory tile lowered through a register tile in the copy layout, a fragment
  spread over threads) the tile goes row-major through the scratch area: src is staged, the
  rows are scanned there as the emitter scans shared tiles (a row per thread, or a warp per
  row, 32 elements a step with tc::warp_inclusive_scan and a carry, when there are fewer rows
  than threads and rows of 32 or more), and every thread reads back the elements it holds.
"""

from __future__ import annotations

import math

from tilecraft.block.parallel import CumSumRegister

from ..cuda.cexpr import ctype, zero
from ..cuda.indexing import frag_coords


def scan_type(src_dtype, out_dtype) -> str:
    """The C type of the running sum (emit_scan.py's rule)."""
    if "float64" in (src_dtype.name, out_dtype.name):
        return "double"
    if src_dtype.is_float or out_dtype.is_float:
        return "float"
    return "tc::u64" if src_dtype.name == "uint64" else "tc::i64"


def rows_in_registers(s: CumSumRegister) -> bool:
    """Each thread holds whole rows along `dim`, in the same registers as out's."""
    lay = s.src.layout
    return s.out.layout == lay and not any(m in lay.spatial_modes for m in lay.dim_modes[s.dim])


class ScanPrinter:
    def _CumSumRegister(self, s: CumSumRegister) -> None:
        rev = ", reversed" if s.reverse else ""
        self.w(f"// cumsum {s.src.buffer.name} -> {s.out.buffer.name} over dim {s.dim}{rev}")
        t = scan_type(s.src.dtype, s.out.dtype)
        if rows_in_registers(s):
            self.scan_registers(s, t)
        else:
            self.scan_staged(s, t)

    def scan_registers(self, s: CumSumRegister, t: str) -> None:
        """Thread 0's registers grouped by row (the others' group the same way: a row's
        registers differ only in local modes of `dim`), each group summed in order."""
        lay = s.src.layout
        rows: dict[tuple, list[tuple[int, int]]] = {}
        for li in range(lay.local_size):
            idx = lay.map(0, li)
            rest = tuple(int(x) for i, x in enumerate(idx) if i != s.dim)
            rows.setdefault(rest, []).append((int(idx[s.dim]), li))
        src, out, ot = self.tensor(s.src), self.tensor(s.out), ctype(s.out.dtype)
        self.open("")
        self.w(f"{t} acc;")
        for row in rows.values():
            row.sort(reverse=s.reverse)
            self.w(f"acc = {zero(t)};  // a row of {len(row)} registers")
            for _, li in row:
                self.w(f"acc += tc::cast<{t}>({src}[{li}]); {out}[{li}] = tc::cast<{ot}>(acc);")
        self.close()

    def scan_staged(self, s: CumSumRegister, t: str) -> None:
        shape = [int(d) for d in s.src.shape]
        length, inner = shape[s.dim], math.prod(shape[s.dim + 1:])
        rows, nt = math.prod(shape) // length, self.program.num_threads
        ot = ctype(s.out.dtype)
        self.open("")
        (src,) = self.stage([s.src])  # (barriers before and after)
        base = -(-math.prod(shape) * s.src.dtype.bits // 8 // 16) * 16
        self.w(f"{ot}* scan = reinterpret_cast<{ot}*>(tc_smem + {self.stage_base} + {base});")
        self.scratch_needs(self.stage_base, base + math.prod(shape) * s.out.dtype.bits // 8)
        kk = f"({length - 1} - kk)" if s.reverse else "kk"
        flat = (f"c * {length} + {kk}" if inner == 1 else
                f"(c / {inner} * {length} + {kk}) * {inner} + c % {inner}")
        if length >= 32 and rows < nt and nt % 32 == 0:
            self.w("const int lane = tid % 32;")
            self.open(f"for (int c = tid / 32; c < {rows}; c += {nt // 32})")
            self.w(f"{t} acc = {zero(t)};")
            self.open(f"for (int it = 0; it < {length}; it += 32)")
            self.w("const int kk = it + lane;")
            self.w(f"{t} val = kk < {length} ? tc::cast<{t}>({src}[{flat}]) : {zero(t)};")
            self.w("val = tc::warp_inclusive_scan(val) + acc;")
            self.w(f"if (kk < {length}) scan[{flat}] = tc::cast<{ot}>(val);")
            self.w("acc = __shfl_sync(0xffffffffu, val, 31);")
        else:
            self.open(f"for (int c = tid; c < {rows}; c += {nt})")
            self.w(f"{t} acc = {zero(t)};")
            self.open(f"for (int kk = 0; kk < {length}; ++kk)")
            self.w(f"acc += tc::cast<{t}>({src}[{flat}]);")
            self.w(f"scan[{flat}] = tc::cast<{ot}>(acc);")
        self.close()
        self.close()
        self.w(self.bar_sync)
        self.per_register(s.out)
        c = frag_coords(s.out.layout, "tid", "li")
        pos = c[0]
        for i, n in zip(c[1:], shape[1:]):
            pos = f"({pos}) * {n} + {i}"
        self.w(f"{self.tensor(s.out)}[li] = scan[{pos}];")
        self.close()
        self.close()

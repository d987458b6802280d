"""Packed tensors (sub-byte ints, custom floats) in the block printer: element access text and
the byte ownership of stores. The contract is docs/dtypes.md, "On the GPU"; the device side is
include/tilecraft/lowbit.cuh.

Element i of a b-bit tensor is bits [i*b, (i+1)*b) of its bit string, LSB first. Global and
shared tensors are `unsigned char*`; a register tensor is `tc::u32 r[ceil(n*b/32)]` (element li
of the thread's bit string: `tc::bits_get<b>(r, li)`, a shift of constants once `li` is
unrolled). Values are the code types `tc::SubInt<b, S>` / `tc::SubFloat<E, M>`.

A store to global or shared memory writes whole bytes with plain stores where `whole_bytes`
proves each thread's elements cover every byte they touch (then no other thread writes other
bits of those bytes; a replica writes the same bits); otherwise each element goes through a
32-bit compare-and-swap loop on the word(s) holding it (`tc::bits_store_atomic`), race-free when
threads write bits of one byte. 8-bit packed types (float8_e3m4, ...) are whole bytes always.

    uint4, spatial(16, 8).local(1, 8), row of 64:   2 elements per byte, each thread 4 bytes:
      p[flat * 4 / 8] = (unsigned char)(get(r, 0) | get(r, 1) << 4);  ...
    int6, local(4).spatial(32):                     neighbours belong to other threads:
      tc::bits_store_atomic<6>(p, flat, tc::bits_get<6>(r, li));
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tilecraft.ir.expr import const_int
from tilecraft.ir.simplify import linear_form

from ..cuda.cexpr import ctype, is_packed


def words(n: int, bits: int) -> int:
    """The u32 words of a thread's `n` packed elements of `bits` bits."""
    return max(1, -(-n * bits // 32))


def nbytes(n: int, bits: int) -> int:
    """The bytes `n` elements of `bits` bits occupy (the tail byte partly used)."""
    return -(-n * bits // 8)


@dataclass(frozen=True)
class Piece:
    """Bits [elem_lo, elem_lo + n) of local element `li` are bits [byte_lo, byte_lo + n) of a
    byte."""

    li: int
    elem_lo: int
    byte_lo: int
    n: int


def byte_pieces(start: int, li: int, bits: int) -> list[tuple[int, Piece]]:
    """(byte, piece) of the element `li` whose bits start at stream bit `start`."""
    out = []
    for k in range(start // 8, (start + bits - 1) // 8 + 1):
        lo, hi = max(start, 8 * k), min(start + bits, 8 * k + 8)
        out.append((k, Piece(li, lo - start, lo - 8 * k, hi - lo)))
    return out


def whole_bytes(bits: int, rel: np.ndarray, base_mod8: int | None) -> list[list[Piece]] | None:
    """The bytes thread 0 writes, as pieces of its elements, when every thread's elements cover
    every byte they touch and all threads do the same thing shifted by whole bytes; else None.

    `rel[t, li]`: element index (in the tensor) of local element li of thread t, less an
    unknown base whose bit offset is `base_mod8` modulo 8 (None: unknown)."""
    if base_mod8 is None or bits >= 8:
        return None
    pos = base_mod8 + bits * rel.astype(np.int64)
    shift = pos - pos[:1]
    if (shift != shift[:, :1]).any() or (shift[:, 0] % 8).any():
        return None  # the threads' patterns differ (or are not byte-shifted copies)
    first = pos[0]
    if len(set(first.tolist())) != len(first):
        return None  # an element twice in one thread
    groups: dict[int, list[Piece]] = {}
    for li, start in enumerate(first.tolist()):
        for k, piece in byte_pieces(start, li, bits):
            groups.setdefault(k, []).append(piece)
    if any(sum(p.n for p in g) != 8 for g in groups.values()):
        return None
    return [sorted(groups[k], key=lambda p: p.byte_lo) for k in sorted(groups)]


def base_bit_mod8(bits: int, strides: list[int], offsets) -> int | None:
    """(bits * sum(strides[d] * offsets[d])) mod 8 when it is the same for every value of the
    offsets' variables (affine offsets), else None."""
    total = 0
    for stride, off in zip(strides, offsets):
        form = linear_form(off)
        if form is None or any(bits * stride * c % 8 for c in form[0].values()):
            return None
        total += bits * stride * form[1]
    return total % 8


def byte_aligned(bits: int, e) -> bool:
    """`e * bits` is a multiple of 8 for every value of e's variables."""
    form = linear_form(e)
    return form is not None and not any(bits * c % 8 for c in (*form[0].values(), form[1]))


def constant_offsets(offsets) -> list[int] | None:
    vals = [const_int(o) for o in offsets]
    return None if any(v is None for v in vals) else vals


class ByteCopies:
    """copy_async of a packed tile, row by row in whole bytes (a mixin of SubbytePrinter)."""

    def copy_async_bytes(self, s) -> bool:
        """The copy as whole bytes spread over the threads when every row of the tile is whole
        bytes, contiguous in both tensors and inside the global tensor; False otherwise (the
        element-wise form then)."""
        dst, src, b = s.dst, s.src.buffer, s.dst.dtype.bits
        shape = [int(d) for d in dst.shape]
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        if b >= 8 or cols * b % 8 or s.dims[-1] != len(src.shape) - 1:
            return False
        if not all(isinstance(d, int) for d in src.shape) or not self.in_bounds(s, shape):
            return False
        strides = [int(np.prod(src.shape[d + 1:])) for d in range(len(src.shape))]
        if base_bit_mod8(b, strides, s.offset) != 0 or any(
                strides[d] * b % 8 for d in s.dims[:-1]):
            return False
        grid = np.indices(shape).reshape(len(shape), rows, cols)
        offs = np.asarray(dst.layout.offset(*grid))
        if (offs != offs[:, :1] + np.arange(cols)).any() or (offs[:, 0] * b % 8).any():
            return False
        row_bytes, nt = cols * b // 8, self.program.num_threads
        coords = [f"(r / {int(np.prod(shape[k + 1:-1]))}) % {shape[k]}"
                  for k in range(len(shape) - 1)] + ["0"]
        flat, _ = self.global_flat(s.src, self.tile_index(s, coords), s)
        start = self.bit_index(src, flat)
        self.w(f"// copy_async {src.name} -> {dst.buffer.name}: copied when issued, in rows of "
               f"{row_bytes} whole bytes")
        self.open(f"for (int e = tid; e < {rows * row_bytes}; e += {nt})")
        self.w(f"const int r = e / {row_bytes}, c = e % {row_bytes};")
        self.w(f"{self.tensor(dst)}[({self.shared_offset(s, dst, coords)}) * {b} / 8 + c] = "
               f"{self.tensor(s.src)}[({start}) * {b} / 8 + c];")
        self.close()
        return True


class SubbytePrinter(ByteCopies):
    """Element access of packed tensors for the printer's mixins (value text in the code type of
    the dtype; register `slot` and memory `index` are C text)."""

    def reg_get(self, t, slot: str) -> str:
        """The value of register element `slot` of register tensor `t`."""
        if not is_packed(t.dtype):
            return f"{self.tensor(t)}[{slot}]"
        return f"tc::from_code<{ctype(t.dtype)}>({self.reg_code(t, slot)})"

    def reg_code(self, t, slot: str) -> str:
        return f"tc::bits_get<{t.dtype.bits}>({self.tensor(t)}, {slot})"

    def reg_set(self, t, slot: str, value: str) -> str:
        """The statement `t[slot] = value` (`value`: C text of t's value type)."""
        if not is_packed(t.dtype):
            return f"{self.tensor(t)}[{slot}] = {value};"
        return self.reg_set_code(t, slot, f"tc::code({value})")

    def reg_set_code(self, t, slot: str, code: str) -> str:
        return f"tc::bits_set<{t.dtype.bits}>({self.tensor(t)}, {slot}, {code});"

    def mem_code(self, dtype, ptr: str, index: str) -> str:
        """The code of element `index` of packed memory at `ptr`."""
        if dtype.bits == 8:
            return f"{ptr}[{index}]"
        return f"tc::bits_load<{dtype.bits}>({ptr}, {index})"

    def mem_get(self, dtype, ptr: str, index: str) -> str:
        if not is_packed(dtype):
            return f"{ptr}[{index}]"
        return f"tc::from_code<{ctype(dtype)}>({self.mem_code(dtype, ptr, index)})"

    def mem_set_code(self, dtype, ptr: str, index: str, code: str) -> str:
        """Element `index` of packed memory at `ptr` := code, race-free (a byte store for 8-bit
        types, else a compare-and-swap loop)."""
        if dtype.bits == 8:
            return f"{ptr}[{index}] = (unsigned char)({code});"
        return f"tc::bits_store_atomic<{dtype.bits}>({ptr}, {index}, {code});"

    def mem_set(self, dtype, ptr: str, index: str, value: str) -> str:
        if not is_packed(dtype):
            return f"{ptr}[{index}] = {value};"
        return self.mem_set_code(dtype, ptr, index, f"tc::code({value})")

    def bit_index(self, buf, flat: str) -> str:
        """`flat` as the index type of a packed access: 64-bit where the bits pass 2^31."""
        if not is_packed(buf.dtype):
            return flat
        shape = buf.shape
        if all(isinstance(d, int) for d in shape) and int(np.prod(shape)) * buf.dtype.bits < 2**31:
            return flat
        return f"(long long)({flat})"

    def store_whole_bytes(self, reg, ptr: str, groups: list[list[Piece]], index_of) -> None:
        """Plain byte stores of `groups` (whole_bytes): byte (index_of(li) * b + lo) / 8 of its
        first piece, value the OR of the pieces of the thread's registers."""
        b = reg.dtype.bits
        self.w(f"// whole bytes: each thread owns the {len(groups)} bytes it writes")
        for g in groups:
            first = g[0]
            parts = []
            for p in g:
                x = self.reg_code(reg, str(p.li))
                x = f"({x} >> {p.elem_lo})" if p.elem_lo else x
                parts.append(f"({x} << {p.byte_lo})" if p.byte_lo else x)
            lo = f" + {first.elem_lo}" if first.elem_lo else ""
            at = f"(({index_of(first.li)}) * {b}{lo}) / 8"  # (a non-negative bit index)
            self.w(f"{ptr}[{at}] = (unsigned char)({' | '.join(parts)});")


def store_rel_global(s, reg) -> tuple[np.ndarray, int | None] | None:
    """(element index of each (thread, local) less the tile's base, the base's bit offset mod 8)
    for store_global `s`; None where the tensor's strides are not constants."""
    shape = s.dst.buffer.shape
    if not all(isinstance(d, int) for d in shape):
        return None
    strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
    table = reg.layout.index_table()  # [threads, local, tile ndim]
    rel = sum(table[..., k] * strides[d] for k, d in enumerate(s.dims))
    return np.asarray(rel), base_bit_mod8(reg.dtype.bits, strides, s.offset)


def store_rel_shared(s, reg) -> np.ndarray | None:
    """Element offsets in shared `s.dst` of each (thread, local) of store_shared `s`, when its
    offsets are constants (the tensor's first byte is byte aligned: bit offset 0)."""
    offs = constant_offsets(s.offset)
    if offs is None:
        return None
    table = reg.layout.index_table()
    idx = list(offs)
    for k, d in enumerate(s.dims):
        idx[d] = table[..., k] + offs[d]
    idx = [np.broadcast_to(np.asarray(i), table.shape[:2]) for i in idx]
    return np.asarray(s.dst.layout.offset(*idx))

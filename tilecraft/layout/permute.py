"""Register layouts that hold the same elements per thread in another local order.

A `cast` may change its tensor's layout within each thread (`T.cast(x, dtype, layout=L)`): the
thread keeps its elements, only their register order changes, the same way in every thread
(`local_permutation`). The fast casts of 1-, 2- and 4-bit integers (fast_cast.cuh) make the
halves of a 32-bit result word from codes k and k + 16/b of a source word, so a source whose
words hold their elements in `interleave_words` order lands in natural order with no PRMT:

    pack_layout (uint4, 8 codes a word):  element j of a word at code position j
    interleave_words(pack_layout, 4):     element j at position (j % 2) * 4 + j // 2
        -> cast(view(bytes, uint4, interleaved), f16, layout=pack_layout) is 4 LOP3, 2 HSUB2 (or
           HFMA2) and 2 HFMA2 per word, the PRMTs gone
"""

from __future__ import annotations

import numpy as np

from ._util import is_power_of_two
from .errors import LayoutError
from .fragment import Fragment


def local_permutation(src: Fragment, out: Fragment) -> tuple[int, ...] | None:
    """`perm` with out's local j = src's local perm[j] in every thread (the same shape, thread
    count and elements per thread); None when there is none common to all threads."""
    if src.shape != out.shape or src.num_threads != out.num_threads \
            or src.local_size != out.local_size:
        return None
    a, b = src.index_table(), out.index_table()  # [threads, local, ndim]
    perm = None
    for t in range(a.shape[0]):
        where = {tuple(x): i for i, x in enumerate(a[t].tolist())}
        p = tuple(where.get(tuple(x), -1) for x in b[t].tolist())
        if -1 in p or len(where) != src.local_size or (perm is not None and p != perm):
            return None
        perm = p
    return perm


def interleave_permutation(count: int, bits: int) -> tuple[int, ...]:
    """The local permutation (as `local_permutation` returns it) from `interleave_words` order
    back to natural order for `count` elements of `bits` bits (32 / bits per word)."""
    per, half = 32 // bits, 16 // bits
    return tuple(j // per * per + (j % 2) * half + (j % per) // 2 for j in range(count))


def interleave_words(layout: Fragment, bits: int) -> Fragment:
    """`layout` with the elements of each 32-bit word of `bits`-bit codes (bits 1, 2 or 4)
    reordered so that element j of a word sits at position (j % 2) * 16/bits + j // 2."""
    if bits not in (1, 2, 4):
        raise LayoutError(f"words interleave 1-, 2- or 4-bit codes, not {bits}-bit ones")
    per = 32 // bits
    sizes = [layout.mode_shape[m] for m in layout.local_modes]
    if layout.local_size % per or not all(is_power_of_two(s) for s in sizes):
        raise LayoutError(f"interleaving words of {per} codes needs a multiple of {per} "
                          f"elements a thread in power-of-two local modes, not {sizes}")
    # split every local mode into binary digits (major first); rotate the word's lowest digit
    # (which of a pair) to the top of the word's digits
    mode_shape, spatial, local, new_id = [], [], [], {}
    for m, size in enumerate(layout.mode_shape):
        n = max(int(size).bit_length() - 1, 0) if m in layout.local_modes else 0
        ids = list(range(len(mode_shape), len(mode_shape) + max(n, 1)))
        mode_shape += [2] * n if n else [size]
        new_id[m] = ids
    spatial = [e if e < 0 else new_id[e][0] for e in layout.spatial_modes]
    for m in layout.local_modes:
        local += new_id[m]
    w = per.bit_length() - 1  # digits of a position within a word
    word = local[len(local) - w:]
    local = local[:len(local) - w] + [word[-1]] + word[:-1]
    result = Fragment.create(layout.shape, mode_shape, spatial, local)
    want = interleave_permutation(layout.local_size, bits)
    assert local_permutation(result, layout) == want, (result, layout)
    return result


def apply_permutation(regs: np.ndarray, perm: tuple[int, ...]) -> np.ndarray:
    """[threads, local] registers reordered: column j of the result is column perm[j]."""
    return np.ascontiguousarray(regs[:, list(perm)])

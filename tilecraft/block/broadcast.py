"""Broadcasting a register tensor against a bigger one (numpy's rule, same rank): `x - m` with
x [M, N] and m [M, 1] (a row reduction with keepdim). Each thread reads, for every element of
x it holds, the element of m that element needs, from its own registers: the layouts must put
it there (a row's maximum is replicated on the threads that hold the row). `broadcast_slots`
says where, or that some thread lacks it (a located error in the verifier).
"""

from __future__ import annotations

import functools

import numpy as np

from tilecraft.layout import Fragment


def broadcastable(small: tuple, full: tuple) -> bool:
    """`small` broadcasts to `full`: the same rank, each extent equal or 1."""
    return len(small) == len(full) and all(s in (1, f) for s, f in zip(small, full))


@functools.lru_cache(maxsize=256)
def broadcast_slots(full: Fragment, small: Fragment) -> np.ndarray:
    """[threads, full.local_size]: the local slot of `small`, in the same thread, holding the
    element that element (t, e) of `full` broadcasts from; -1 where the thread does not hold it."""
    idx = full.index_table()  # [threads, local, ndim]
    proj = np.where(np.array(small.shape) == 1, 0, idx)
    flat = np.ravel_multi_index(tuple(proj[..., d] for d in range(small.ndim)), small.shape)
    table = np.full((small.num_threads, small.size), -1, dtype=np.int64)
    sidx = small.index_table()
    sflat = np.ravel_multi_index(tuple(sidx[..., d] for d in range(small.ndim)), small.shape)
    t = np.broadcast_to(np.arange(small.num_threads)[:, None], sflat.shape)
    e = np.broadcast_to(np.arange(small.local_size)[None, :], sflat.shape)
    table[t, sflat] = e
    threads = np.broadcast_to(np.arange(full.num_threads)[:, None], flat.shape)
    return table[threads, flat]

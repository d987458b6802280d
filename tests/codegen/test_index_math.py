"""The index arithmetic the CUDA emitters print, evaluated in Python for every thread."""

import itertools
import math
from types import SimpleNamespace

import pytest

from tilecraft.codegen.cuda.emit_copy import _chunk_coords


def c_eval(expr: str, **env: int) -> int:
    # the printed expressions use only + * / % on non-negative ints: C `/` is floor division
    return eval(expr.replace("/", "//"), {}, env)  # noqa: S307


@pytest.mark.parametrize("cshape, threads", [
    ((128, 4), 128), ((32, 16), 128), ((64, 16), 256), ((128, 16), 128), ((8, 16), 128),
    ((256, 2), 128), ((3, 64), 64), ((16, 8, 4), 64), ((64, 1), 32),
])
def test_chunk_coords_cover_every_chunk_once(cshape, threads):
    em = SimpleNamespace(state=SimpleNamespace(num_threads=threads))
    coords = _chunk_coords(em, cshape)
    total = math.prod(cshape)
    seen = []
    for it in range(math.ceil(total / threads)):
        for tid in range(threads):
            if it * threads + tid >= total:
                continue
            seen.append(tuple(c_eval(e, tid=tid, it=it, c=it * threads + tid) for e in coords))
    assert sorted(seen) == list(itertools.product(*map(range, cshape)))

"""Kronecker product, division and reduction of register layouts (Tilus section 4.2).

Product (rank-broadcast like numpy: the lower-rank operand gets leading size-1 dimensions):

    (f * g)(t, i) = f(t // Tg, i // Ng) ⊙ Sg + g(t % Tg, i % Ng)

In the unified form the product concatenates, per dimension, f's modes before g's modes, and
f's spatial (local) modes before g's, then canonicalises.

Division undoes a product: `a / b` is the q with `q * b == a` (b must be the *suffix* factor:
the inner modes of every dimension, the least significant thread and local digits);
`left_divide(a, f)` is the g with `f * g == a`. Both split a's modes at the boundaries the
factor implies and compare the split-off part with the factor; `LayoutError` when they differ.
Instruction selection uses division: a register tile with layout L can be computed by an mma
whose operand layout is A iff `divides(L, A)`, and `L / A` is the per-warp/per-thread loop.
"""

from __future__ import annotations

from ._raw import RawFragment
from .errors import LayoutError
from .fragment import Fragment


def kron(f: Fragment, g: Fragment) -> Fragment:
    """Kronecker product `f * g` (f outer, g inner)."""
    ndim = max(f.ndim, g.ndim)
    rf = f.raw().broadcast(ndim)
    rg = g.raw().broadcast(ndim).offset_ids(len(f.mode_shape))
    raw = RawFragment(
        [a * b for a, b in zip(rf.shape, rg.shape)],
        [a + b for a, b in zip(rf.dims, rg.dims)],
        {**rf.sizes, **rg.sizes},
        rf.spatial + rg.spatial,
        rf.local + rg.local,
    )
    return Fragment.from_raw(raw)


def _factor(a: Fragment, inner_shape, inner_threads: int, inner_locals: int):
    """Split a into (outer, inner) layouts with the given inner extents, or None."""
    raw = a.raw()
    for group, target in zip(raw.dims, inner_shape):
        if not raw.cut(group, target):
            return None
    if not raw.cut(raw.spatial, inner_threads) or not raw.cut(raw.local, inner_locals):
        return None

    def boundary(seq: list[int], target: int) -> int:
        """Position in seq where its innermost entries multiplying to target begin."""
        p, k = 1, len(seq)
        while p < target:
            k -= 1
            p *= raw.size_of(seq[k])
        return k

    dim_cuts = [boundary(g, n) for g, n in zip(raw.dims, inner_shape)]
    sp_cut = boundary(raw.spatial, inner_threads)
    lo_cut = boundary(raw.local, inner_locals)
    inner_modes = {m for g, k in zip(raw.dims, dim_cuts) for m in g[k:]}
    if inner_modes != {e for e in raw.spatial[sp_cut:] if e >= 0} | set(raw.local[lo_cut:]):
        return None
    outer = RawFragment(
        [s // n for s, n in zip(raw.shape, inner_shape)],
        [g[:k] for g, k in zip(raw.dims, dim_cuts)],
        dict(raw.sizes),
        raw.spatial[:sp_cut],
        raw.local[:lo_cut],
    )
    inner = RawFragment(
        list(inner_shape),
        [g[k:] for g, k in zip(raw.dims, dim_cuts)],
        dict(raw.sizes),
        raw.spatial[sp_cut:],
        raw.local[lo_cut:],
    )
    return Fragment.from_raw(outer), Fragment.from_raw(inner)


def _ratio(a: Fragment, b: Fragment):
    """Inner extents for dividing a by b, or an explanation why they do not divide."""
    if b.ndim > a.ndim:
        return f"{b} has higher rank than {a}"
    bs = (1,) * (a.ndim - b.ndim) + b.shape
    if any(x % y for x, y in zip(a.shape, bs)):
        return f"shape {bs} does not divide shape {a.shape}"
    if a.num_threads % b.num_threads or a.local_size % b.local_size:
        return (
            f"threads/local sizes ({b.num_threads}, {b.local_size}) do not divide "
            f"({a.num_threads}, {a.local_size})"
        )
    return bs


def quotient(a: Fragment, b: Fragment) -> Fragment | None:
    """The q with `q * b == a`, or None (no error message is built: cheap for predicates)."""
    bs = _ratio(a, b)
    if isinstance(bs, str):
        return None
    parts = _factor(a, bs, b.num_threads, b.local_size)
    if parts is None or parts[1] != Fragment.from_raw(b.raw().broadcast(a.ndim)):
        return None
    return parts[0]


def divide(a: Fragment, b: Fragment) -> Fragment:
    """The q with `q * b == a`; `LayoutError` when b is not a suffix factor of a."""
    q = quotient(a, b)
    if q is None:
        bs = _ratio(a, b)
        why = bs if isinstance(bs, str) else "it is not an inner (suffix) factor"
        raise LayoutError(f"{b} does not divide {a}: {why}")
    if kron(q, b) != a:  # cannot happen; guards the algebra
        raise LayoutError(f"internal: ({q}) * ({b}) != {a}")
    return q


def left_divide(a: Fragment, f: Fragment) -> Fragment:
    """The g with `f * g == a`; `LayoutError` when f is not a prefix factor of a."""
    fs = _ratio(a, f)
    if isinstance(fs, str):
        raise LayoutError(f"{f} does not left-divide {a}: {fs}")
    inner = [x // y for x, y in zip(a.shape, fs)]
    parts = _factor(a, inner, a.num_threads // f.num_threads, a.local_size // f.local_size)
    if parts is None or parts[0] != Fragment.from_raw(f.raw().broadcast(a.ndim)):
        raise LayoutError(f"{f} does not left-divide {a}: it is not an outer (prefix) factor")
    g = parts[1]
    if kron(f, g) != a:  # cannot happen; guards the algebra
        raise LayoutError(f"internal: ({f}) * ({g}) != {a}")
    return g


def divides(a: Fragment, b: Fragment) -> bool:
    """True when `a / b` exists, i.e. b is a suffix factor of a (same argument order as `a / b`)."""
    return quotient(a, b) is not None


def reduce(a: Fragment, dim: int, keepdim: bool = True) -> Fragment:
    """Layout of the result of reducing `a` over `dim`.

    Local modes of `dim` disappear (each thread first reduces its own elements); spatial modes of
    `dim` become replications (after the cross-thread combine, every thread that shared the
    dimension holds the result). With `keepdim` the extent becomes 1, otherwise the dim is removed.
    """
    if not -a.ndim <= dim < a.ndim:
        raise LayoutError(f"dim {dim} out of range for a rank-{a.ndim} layout")
    dim %= a.ndim
    raw = a.raw()
    gone = set(raw.dims[dim])
    raw.spatial = [-raw.sizes[e] if e in gone else e for e in raw.spatial]
    raw.local = [e for e in raw.local if e not in gone]
    raw.dims[dim] = []
    raw.shape[dim] = 1
    if not keepdim:
        del raw.dims[dim]
        del raw.shape[dim]
    return Fragment.from_raw(raw)

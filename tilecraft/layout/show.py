"""Text grids and PNG pictures of layouts.

`Fragment.show()` prints `thread:local` in every cell of the tile (Tilus figure 4); replicated
cells list every thread, with runs compressed (`4-7:1`). `SharedLayout.show()` prints the element
offset of every cell (or, with `group=g`, the offset of g-element groups divided by g: the 16-byte
vector index for swizzles). Rank > 2 layouts print one grid per leading index.
`plot(path)` draws the same grid with matplotlib (an optional dependency).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import LayoutError

if TYPE_CHECKING:
    from .fragment import Fragment
    from .shared import SharedLayout


class Grid(str):
    """A str whose repr is itself, so `layout.show()` displays as a grid in a REPL."""

    def __repr__(self) -> str:
        return str(self)


def _runs(threads: list[int]) -> str:
    parts, start = [], 0
    for k in range(1, len(threads) + 1):
        if k == len(threads) or threads[k] != threads[k - 1] + 1:
            a, b = threads[start], threads[k - 1]
            parts.append(f"{a}-{b}" if b - a >= 2 else ",".join(map(str, range(a, b + 1))))
            start = k
    return ",".join(parts)


def format_grid(shape: tuple[int, ...], cell: Callable[[tuple[int, ...]], str]) -> Grid:
    """Aligned grid of `cell(index)` with row/column labels; one block per leading index."""
    if not shape:
        return Grid(cell(()))
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1])
    lead_shape = shape[:-2]
    blocks = []
    for lead in itertools.product(*(range(n) for n in lead_shape)):
        lead_idx = lead if len(shape) >= 2 else ()
        table = [
            [cell(lead_idx + ((r, c) if len(shape) >= 2 else (c,))) for c in range(cols)]
            for r in range(rows)
        ]
        width = max(max(len(x) for row in table for x in row), len(str(cols - 1)))
        label = len(str(rows - 1))
        lines = [" " * label + " " + " ".join(str(c).rjust(width) for c in range(cols))]
        for r, row in enumerate(table):
            lines.append(str(r).rjust(label) + " " + " ".join(x.rjust(width) for x in row))
        if lead_shape:
            lines.insert(0, "[" + ", ".join(map(str, lead)) + ", :, :]")
        blocks.append("\n".join(lines))
    return Grid("\n\n".join(blocks))


def _fragment_cells(layout: Fragment) -> dict[tuple[int, ...], tuple[list[int], int]]:
    table = layout.index_table()
    owners: dict[tuple[int, ...], tuple[list[int], int]] = {}
    for t in range(layout.num_threads):
        for i in range(layout.local_size):
            key = tuple(int(x) for x in table[t, i])
            owners.setdefault(key, ([], i))[0].append(t)
    return owners


def fragment_grid(layout: Fragment) -> Grid:
    """Text grid of a register layout: `thread:local` per logical element."""
    owners = _fragment_cells(layout)

    def cell(idx: tuple[int, ...]) -> str:
        threads, i = owners[idx]
        return f"{_runs(threads)}:{i}"

    return format_grid(layout.shape, cell)


def shared_grid(layout: SharedLayout, group: int = 1) -> Grid:
    """Text grid of a shared/global layout: the offset (// group) of each cell (group)."""
    shape = layout.shape
    if group > 1:
        if shape[-1] % group:
            raise LayoutError(f"group {group} does not divide the last extent {shape[-1]}")
        shape = shape[:-1] + (shape[-1] // group,)

    def cell(idx: tuple[int, ...]) -> str:
        if group == 1:
            return str(layout.offset(*idx))
        first = layout.offset(*idx[:-1], idx[-1] * group)
        for k in range(1, group):
            if layout.offset(*idx[:-1], idx[-1] * group + k) != first + k:
                raise LayoutError(f"elements {group} at a time are not contiguous in {layout}")
        return str(first // group)

    return format_grid(shape, cell)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(
            "plot() needs matplotlib: pip install matplotlib (or tilecraft[plot])"
        ) from err
    return plt


def _draw(path: str, rows: int, cols: int, text, color, title: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(2.0, 0.55 * cols), max(1.5, 0.4 * rows)))
    cmap = plt.get_cmap("tab20")
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(
                plt.Rectangle(
                    (c, rows - 1 - r),
                    1,
                    1,
                    facecolor=cmap(color(r, c) % 20),
                    edgecolor="black",
                    linewidth=0.5,
                )
            )
            ax.text(c + 0.5, rows - 0.5 - r, text(r, c), ha="center", va="center", fontsize=6)
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_axis_off()
    ax.set_title(title, fontsize=8)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def _as_2d(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) > 2:
        raise ValueError(f"plot() draws rank <= 2 layouts, got shape {shape}")
    return (1, shape[0]) if len(shape) == 1 else (1, 1) if not shape else shape  # type: ignore


def _idx(shape: tuple[int, ...], r: int, c: int) -> tuple[int, ...]:
    return (r, c) if len(shape) == 2 else (c,) if len(shape) == 1 else ()


def plot_fragment(layout: Fragment, path: str) -> None:
    """PNG of a register layout: cells coloured by thread, labelled `thread:local`."""
    _pyplot()
    rows, cols = _as_2d(layout.shape)
    owners = _fragment_cells(layout)

    def text(r: int, c: int) -> str:
        threads, i = owners[_idx(layout.shape, r, c)]
        return f"{_runs(threads)}:{i}"

    def color(r: int, c: int) -> int:
        return owners[_idx(layout.shape, r, c)][0][0]

    _draw(path, rows, cols, text, color, f"shape={layout.shape} threads={layout.num_threads}")


def plot_shared(layout: SharedLayout, path: str, dtype_bits: int | None = None) -> None:
    """PNG of a shared layout: cells labelled by offset, coloured by 16-byte bank group if
    `dtype_bits` is given (else by offset)."""
    _pyplot()
    rows, cols = _as_2d(layout.shape)

    def off(r: int, c: int) -> int:
        return int(layout.offset(*_idx(layout.shape, r, c)))

    def color(r: int, c: int) -> int:
        return (off(r, c) * dtype_bits // 128) % 8 if dtype_bits else off(r, c)

    _draw(path, rows, cols, lambda r, c: str(off(r, c)), color, f"shape={layout.shape}")

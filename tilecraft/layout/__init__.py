"""tilecraft.layout: the pure layout algebra below the IR (DESIGN 2.4-2.5, docs/layout.md).

Register layouts (`Fragment`, Tilus unified form): primitives `local`, `spatial`, `column_local`,
`column_spatial`, `replicate`; Kronecker product `f * g` and method chaining; division `a / b`,
`left_divide`, `divides`; `reduce`; `map`/`inverse`/`thread_elements`; `show`/`plot`.
Shared/global layouts (`SharedLayout`, alias `Layout`): `row_major`, `column_major`, `strided`,
`tile_to_shape`, `Swizzle`, `make_swizzled_layout`. Reinterpretation: `can_view`, `check_view`,
`weight_load_layout`, `pack_weight_tiles`, `unpack_weight_tiles`. Hardware atoms: `atoms`.
"""

from . import atoms
from .algebra import divide, divides, kron, left_divide, quotient, reduce
from .atoms import MMA_ATOMS, MmaAtom, ldmatrix_layout
from .errors import LayoutError
from .fragment import Fragment
from .primitives import column_local, column_spatial, local, replicate, spatial
from .reinterpret import (
    can_view,
    check_view,
    pack_weight_tiles,
    unpack_weight_tiles,
    weight_load_layout,
)
from .shared import (
    Layout,
    SharedLayout,
    Swizzle,
    column_major,
    row_major,
    stacked,
    strided,
    tile_to_shape,
)
from .swizzle import choose_swizzle_bytes, dtype_bits, make_swizzled_layout, swizzle_for

RegisterLayout = Fragment

__all__ = [
    "MMA_ATOMS",
    "Fragment",
    "Layout",
    "LayoutError",
    "MmaAtom",
    "RegisterLayout",
    "SharedLayout",
    "Swizzle",
    "atoms",
    "can_view",
    "check_view",
    "choose_swizzle_bytes",
    "column_local",
    "column_major",
    "column_spatial",
    "divide",
    "divides",
    "dtype_bits",
    "kron",
    "ldmatrix_layout",
    "left_divide",
    "local",
    "make_swizzled_layout",
    "pack_weight_tiles",
    "quotient",
    "reduce",
    "replicate",
    "row_major",
    "spatial",
    "stacked",
    "strided",
    "swizzle_for",
    "tile_to_shape",
    "unpack_weight_tiles",
    "weight_load_layout",
]

"""Register layouts fixed by hardware instructions (PTX ISA, warp-level mma and ldmatrix).

Notation of the PTX ISA: lane t, `groupID = t // 4`, `threadID_in_group = t % 4`; the local index
i numbers a thread's elements in register order (a0, a1, ... for operand A).

mma.m16n8k16 (.f16/.bf16 inputs), all row-major logical shapes:

* A, 16x16 (M x K): row = groupID + 8 * ((i // 2) % 2), col = 2 * tig + i % 2 + 8 * (i // 4)
  = `column_local(2, 2).spatial(8, 4).local(1, 2)`
* B, 16x8 (K x N):  row = 2 * tig + i % 2 + 8 * (i // 2), col = groupID
  = `local(2, 1).column_spatial(4, 8).local(2, 1)`
* C/D, 16x8 (M x N, f32 or f16): row = groupID + 8 * (i // 2), col = 2 * tig + i % 2
  = `local(2, 1).spatial(8, 4).local(1, 2)`

ldmatrix.m8n8.x{1,2,4}[.trans].b16 loads `num` 8x8 matrices; lane l supplies the address of row
l % 8 of matrix l // 8. We give the result layout of the matrices *stacked vertically* (shape
(8 * num, 8), matrix m in rows 8m..8m+7, in register m): without .trans thread t gets row t // 4,
columns 2 * (t % 4) + {0, 1}; with .trans it gets the transpose: rows 2 * (t % 4) + {0, 1}, column
t // 4. Instruction selection matches other arrangements by division, e.g.
`MMA_M16N8K16_F16.a / LDMATRIX_X1 == column_local(2, 2)`: four matrices, i.e. one ldmatrix.x4.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LayoutError
from .fragment import Fragment
from .primitives import column_local, column_spatial, local, spatial


@dataclass(frozen=True)
class MmaAtom:
    """A warp-level mma instruction shape with the register layouts of its operands."""

    name: str
    m: int
    n: int
    k: int
    a: Fragment  # M x K
    b: Fragment  # K x N
    c: Fragment  # M x N (also the layout of D)

    @property
    def d(self) -> Fragment:
        """Layout of the result D (same as C)."""
        return self.c


_C = local(2, 1).spatial(8, 4).local(1, 2)

MMA_M16N8K16_F16 = MmaAtom(
    "mma.m16n8k16.f16",
    16,
    8,
    16,
    a=column_local(2, 2).spatial(8, 4).local(1, 2),
    b=local(2, 1).column_spatial(4, 8).local(2, 1),
    c=_C,
)
MMA_M16N8K8_F16 = MmaAtom(
    "mma.m16n8k8.f16",
    16,
    8,
    8,
    a=local(2, 1).spatial(8, 4).local(1, 2),
    b=column_spatial(4, 8).local(2, 1),
    c=_C,
)
MMA_M16N8K32_S8 = MmaAtom(
    "mma.m16n8k32.s8",
    16,
    8,
    32,
    a=column_local(2, 2).spatial(8, 4).local(1, 4),
    b=local(2, 1).column_spatial(4, 8).local(4, 1),
    c=_C,
)
MMA_ATOMS: dict[str, MmaAtom] = {
    atom.name: atom for atom in (MMA_M16N8K16_F16, MMA_M16N8K8_F16, MMA_M16N8K32_S8)
}

# Convenience names used by the layout rules of gemm.
MMA_M16N8K16_A = MMA_M16N8K16_F16.a
MMA_M16N8K16_B = MMA_M16N8K16_F16.b
MMA_M16N8K16_C = MMA_M16N8K16_F16.c
MMA_M16N8K16_D = MMA_M16N8K16_F16.c


def ldmatrix_layout(num: int = 1, trans: bool = False) -> Fragment:
    """Result layout of `ldmatrix.m8n8.x{num}[.trans].b16`, matrices stacked: shape (8*num, 8)."""
    if num not in (1, 2, 4):
        raise LayoutError(f"ldmatrix loads 1, 2 or 4 matrices, not {num}")
    inner = column_spatial(4, 8).local(2, 1) if trans else spatial(8, 4).local(1, 2)
    return local(num, 1) * inner


LDMATRIX_X1 = ldmatrix_layout(1)
LDMATRIX_X2 = ldmatrix_layout(2)
LDMATRIX_X4 = ldmatrix_layout(4)
LDMATRIX_X1_TRANS = ldmatrix_layout(1, trans=True)
LDMATRIX_X2_TRANS = ldmatrix_layout(2, trans=True)
LDMATRIX_X4_TRANS = ldmatrix_layout(4, trans=True)

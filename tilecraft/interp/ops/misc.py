"""print, device_assert, and the scheduling hints that do not change results."""

from __future__ import annotations

import numpy as np

from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import AnnotateLayout, BufferRegion, DeviceAssert, Print, UseSwizzle

from . import rule
from .common import read


@rule(Print)
def print_(m, op: Print) -> None:
    where = f"block {m.block_index}"
    msg = f"{op.msg}: " if op.msg else ""
    if isinstance(op.value, BufferRegion):
        print(f"[tilecraft {where}] {msg}{op.value} =\n{read(m, op.value)}")
    else:
        print(f"[tilecraft {where}] {msg}{op.value} = {m.ev.eval(op.value)}")


@rule(DeviceAssert)
def device_assert(m, op: DeviceAssert) -> None:
    if not bool(np.all(m.ev.eval(op.cond))):
        raise TilecraftError("TC402", detail=f"{op.msg or op.cond} (block {m.block_index})")


@rule(UseSwizzle)
def use_swizzle(m, op) -> None:
    """Block order changes speed, not results: nothing to do on the interpreter."""


@rule(AnnotateLayout)
def annotate_layout(m, op) -> None:
    """Layouts do not change results: nothing to do on the interpreter."""

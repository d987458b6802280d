"""Every block instruction is either counted by the cost model or listed as costing nothing, so
a new instruction cannot be left out of the model silently (docs/adding_an_op.md)."""

import importlib
import pkgutil

import tilecraft.block
from tilecraft.block.instructions import Instruction, SrcOut
from tilecraft.block.transfer import Tiled
from tilecraft.tune.counts import COUNTED, UNCOUNTED


def _instruction_classes() -> set[type]:
    for m in pkgutil.iter_modules(tilecraft.block.__path__):
        importlib.import_module(f"tilecraft.block.{m.name}")
    found: set[type] = set()
    todo = [Instruction]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found - {SrcOut, Tiled}  # bases, never instructions of their own


def test_every_block_instruction_is_counted_or_listed_as_free():
    missing = {c.__name__ for c in _instruction_classes() - set(COUNTED) - set(UNCOUNTED)}
    assert not missing, f"tilecraft/tune/counts.py does not count {sorted(missing)}"


def test_no_instruction_is_both_counted_and_free():
    assert not set(COUNTED) & set(UNCOUNTED)

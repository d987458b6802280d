"""Frozen: a base for the small immutable value classes that a jit-cache hit imports.

A frozen dataclass costs 0.2-0.7 ms to create at import (its methods are generated with `exec`);
a new process that finds its kernel in the jit cache imports a dozen of them (spans, diagnostics,
the kernel record, resources, cubins, targets). A `Frozen` subclass names its fields in
`__slots__` (in constructor order) and writes its `__init__`, setting fields with
`object.__setattr__`; it gets what `@dataclass(frozen=True)` gave it:

    class Span(Frozen):
        __slots__ = ("file", "line")

        def __init__(self, file: str, line: int) -> None:
            _set(self, "file", file)
            _set(self, "line", line)

equality and hash by field values (of the same class only), a `Span(file='a.py', line=3)` repr
(fields listed in `_hidden` are left out), assignment and deletion refused with
`dataclasses.FrozenInstanceError`, pickling and copying (`__reduce__` calls `__init__` with the
fields in order), and `replace(**changes)` / `as_dict()` for `dataclasses.replace` / `asdict`.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

_set = object.__setattr__


class Frozen:
    __slots__ = ()
    _hidden: tuple[str, ...] = ()  # fields the repr leaves out

    def _values(self) -> tuple:
        return tuple([getattr(self, n) for n in self.__slots__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in self.__slots__ if n not in self._hidden
        )
        return f"{type(self).__qualname__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple:
        return type(self), self._values()

    def as_dict(self) -> dict[str, Any]:
        """The fields by name (not recursive: values are kept as they are)."""
        return {n: getattr(self, n) for n in self.__slots__}

    def replace(self, **changes: Any) -> Any:
        """A copy with `changes` to some fields."""
        return type(self)(**{**self.as_dict(), **changes})

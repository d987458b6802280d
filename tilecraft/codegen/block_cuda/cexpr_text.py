"""C text that the layout algebra can compute with: `SharedLayout.offset(*idx)` evaluated on
index expressions (non-negative integers) gives the C expression of a shared offset, swizzle
included."""

from __future__ import annotations


class C(str):
    """C text that the layout algebra can compute with (non-negative integer operands)."""

    def _op(self, o, fmt: str) -> C:
        if isinstance(o, int) and not isinstance(o, bool):
            o = str(o)
        return C(fmt.format(a=self, b=o))

    def __add__(self, o):
        return self if o == 0 else self._op(o, "({a} + {b})")

    __radd__ = __add__

    def __mul__(self, o):
        return self if o == 1 else C("0") if o == 0 else self._op(o, "({a} * {b})")

    __rmul__ = __mul__

    def __floordiv__(self, o):
        return self if o == 1 else self._op(o, "({a} / {b})")

    def __mod__(self, o):
        return self._op(o, "({a} % {b})")

    def __xor__(self, o):
        return self._op(o, "({a} ^ {b})")

    def __rshift__(self, o):
        return self._op(o, "({a} >> {b})")

    def __and__(self, o):
        return self._op(o, "({a} & {b})")

"""ir.simplify's floor modulos by constants: the dividend's terms and constant reduced modulo n,
a floor division's numerator constant modulo m * n (pipeline stage and phase indices then print
as plain C `%` and `/`); checked against Python's floor semantics over a range of values."""

import itertools

import pytest

from tilecraft.interp.evaluate import Evaluator
from tilecraft.ir import Var
from tilecraft.ir.simplify import simplify

k = Var.create("k", "int32")
j = Var.create("j", "int32")
u = Var.create("u", "uint32")


def evaluate_scalar(e, env):
    """e's value with the variables of `env` bound (the interpreter's evaluator)."""
    return Evaluator(type("Machine", (), {"env": env})()).scalar(e)


@pytest.mark.parametrize("make, printed", [
    (lambda: (k - 1) % 4, "(k + 3) % 4"),
    (lambda: (k * 2 - 2) // 4 % 2, "(k * 2 + 6) // 4 % 2"),
    (lambda: (k // 4 - 1) % 2, "(k // 4 + 1) % 2"),
    (lambda: (k * 4 + j * 6 + 5) % 4, "(j * 2 + 1) % 4"),
    (lambda: (k * 8 - 16) % 4, "0"),
    (lambda: (k - 1) % 4 + (j - 9) // 3, None),
])
def test_floor_modulos_keep_their_values_with_non_negative_constants(make, printed):
    e = make()
    s = simplify(e)
    if printed is not None:
        assert str(s) == printed
    for kv, jv in itertools.product(range(-9, 10), range(-7, 8)):
        env = {k: kv, j: jv}
        assert evaluate_scalar(s, env) == evaluate_scalar(e, env), (kv, jv)


def test_unsigned_modulos_are_left_alone():
    """(u - 1) % 3 wraps modulo 2^32 at u = 0: no reduction is exact there."""
    e = (u - 1) % 3
    assert str(simplify(e)) == str(e)

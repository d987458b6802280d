"""The printer's parenthesis tidying (codegen/block_cuda/tidy.py): it removes only pairs C does
not need, so every tidied line parses as the line it came from."""

import ast
import random

import pytest

from tilecraft.codegen.block_cuda.tidy import tidy_line, tidy_source


@pytest.mark.parametrize("line, tidy", [
    ("S_[(k_ % 2)] = (x_);", "S_[k_ % 2] = x_;"),
    ("y = ((bz_) * 1024);", "y = bz_ * 1024;"),
    ("f((a + b), (c));", "f(a + b, c);"),
    ("y = ((a - b) - c);", "y = a - b - c;"),
    ("y = (a - (b - c));", "y = a - (b - c);"),
    ("y = (a / (b * c));", "y = a / (b * c);"),
    ("y = ((li / 8) * 8) + 1;", "y = (li / 8) * 8 + 1;"),  # / and % keep theirs as operands
    ("x += ((a * b) - c);", "x += a * b - c;"),
    ("y = (-(a * b));", "y = -(a * b);"),
    ("return -(a * b) + 1;", "return -(a * b) + 1;"),
    ("y = *(p + 1);", "y = *(p + 1);"),
    ("y = ((float)x)[0];", "y = ((float)x)[0];"),
    ("y = (tc::cast<float>(x) * 2) + 1;", "y = tc::cast<float>(x) * 2 + 1;"),
    ("(int)(0 + 64);", "(int)(0 + 64);"),
    ("z = (a == (b & c));", "z = a == (b & c);"),
    ("if (((a + 1) < b)) {", "if ((a + 1) < b) {"),
    ("y = (a + b) << 2;", "y = (a + b) << 2;"),
    ("f((a, b));", "f((a, b));"),
    ('printf("(%d)", (x));  // (kept)', 'printf("(%d)", x);  // (kept)'),
    ("#define X ((1))", "#define X ((1))"),
])
def test_redundant_pairs_go_and_needed_ones_stay(line, tidy):
    assert tidy_line(line) == tidy


def _expr(rng: random.Random, depth: int) -> str:
    """A random integer expression printed the way the expression printers do: every
    operation in parentheses."""
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(["a_", "b_", "tid", "li", "3", "128", "x_[li]", "f(a_, 2)"])
    kind = rng.random()
    if kind < 0.1:
        return f"(-{_expr(rng, depth - 1)})"
    if kind < 0.15:
        return f"g({_expr(rng, depth - 1)}, {_expr(rng, depth - 1)})"
    if kind < 0.2:
        return f"x_[{_expr(rng, depth - 1)}]"
    op = rng.choice(["+", "-", "*", "/", "%", "+", "-", "*", "<<", ">>", "&", "^", "|"])
    return f"({_expr(rng, depth - 1)} {op} {_expr(rng, depth - 1)})"


def _tree(c_statement: str) -> str:
    """The parse of a C assignment with the operators C and Python order alike (+ - * / %
    << >> & ^ |, unary minus, calls, subscripts)."""
    return ast.dump(ast.parse(c_statement.rstrip(";")))


def test_random_expressions_parse_the_same_after_tidying():
    rng = random.Random(5)
    changed = 0
    for _ in range(600):
        line = f"y_ = {_expr(rng, 5)};"
        tidy = tidy_line(line)
        assert _tree(tidy) == _tree(line), (line, tidy)
        changed += tidy != line
    assert changed > 400  # (the check is not vacuous)


def test_a_multi_line_source_is_tidied_line_by_line():
    src = "int x = (a);\nfor (int i = 0; (i < n); ++i) {\n  y[(i)] = ((i * 2) + 1);\n}"
    assert tidy_source(src) == ("int x = a;\nfor (int i = 0; (i < n); ++i) {\n"
                                "  y[i] = i * 2 + 1;\n}")

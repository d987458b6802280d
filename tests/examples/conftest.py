"""Fixtures for the example tests: the examples directory on sys.path (the examples import one
another by module name, as they do when run as scripts) and the `device` every test runs on."""

import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request) -> str:
    """Where the kernel runs: "cpu" on the interpreter, "cuda" (marked gpu) on the GPU."""
    return request.param

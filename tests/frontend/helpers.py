"""Helpers the front-end tests share: run on the interpreter, compile through NVRTC, find the
line a kernel marks with `# ERR`."""

import inspect

import pytest

import tilecraft
from tilecraft.codegen.cuda.build import generate_cuda


def run(func, *arrays):
    """Run `func` on the interpreter in place; returns the arrays."""
    tilecraft.compile(func, target="interp")(*arrays)
    return arrays


def compiles(func, arch="sm_90a") -> str:
    """The CUDA source of `func`, after checking that NVRTC compiles it for `arch`."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(func, arch)
    compile_cuda(gen.source, arch, name=gen.name, use_cache=False)
    return gen.source


def err_line(fn, marker="# ERR") -> int:
    """The one line of `fn`'s source that carries `marker`."""
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, ln in enumerate(lines) if marker in ln]
    assert len(hits) == 1
    return hits[0]

"""A diagnostic prints as a user sees it with `python kernel.py`: a short traceback of the user's
own lines, then the message with the caret and the hint; no frames of tilecraft itself."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tilecraft.language as T
from tilecraft import TilecraftError

ROOT = Path(__file__).resolve().parents[2]

JIT_FACTORY = """
import tilecraft
import tilecraft.language as T

@tilecraft.jit(out_idx=[-1])
def matmul(M, N, K):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, transpose_b=True)
            T.copy(C_f, C)
    return kernel

kernel = matmul(64, 64, 32)
"""

PRIM_FUNC = """
import tilecraft.language as T

@T.prim_func
def kernel(A: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        F = T.alloc_fragment((64,), "flaot32")
"""

CALL_TIME = """
import torch
import tilecraft
import tilecraft.language as T

@T.prim_func
def kernel(A: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A[bx] = 1.0

k = tilecraft.compile(kernel, target="interp")
k(torch.zeros(64, dtype=torch.float16))
"""


def run_script(tmp_path: Path, source: str) -> str:
    path = tmp_path / "kernel.py"
    path.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILECRAFT_JIT_CACHE": "0"}
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 1
    return proc.stderr


@pytest.mark.parametrize("source, code, line", [
    (JIT_FACTORY, "TC111", "T.gemm(A_s, B_s, C_f, transpose_b=True)"),
    (PRIM_FUNC, "TC210", 'F = T.alloc_fragment((64,), "flaot32")'),
    (CALL_TIME, "TC303", "def kernel("),
])
def test_diagnostic_prints_the_users_lines_then_the_message(tmp_path, source, code, line):
    err = run_script(tmp_path, source)
    lines = err.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    start = next(i for i, ln in enumerate(lines) if f"error[{code}]" in ln)
    frames = [ln for ln in lines[:start] if ln.lstrip().startswith("File ")]
    assert frames and all("kernel.py" in f for f in frames), err
    assert "tilecraft" + os.sep not in "\n".join(lines[:start])
    assert start <= 12, err  # a few user frames, not ~50 lines of internals
    assert lines[start].startswith("tilecraft.TilecraftError: error[") or \
        lines[start].split(":")[0].endswith("Error"), lines[start]
    assert line in "\n".join(lines[start:])  # the user's source line under the message
    assert "During handling of the above exception" not in err


def test_the_full_traceback_stays_on_the_error_for_debugging_tilecraft():
    with pytest.raises(TilecraftError) as info:
        @T.prim_func
        def kernel(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.copy(A)

    err = info.value
    shown = []
    tb = err.__traceback__
    while tb is not None:
        shown.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert all("tilecraft" + os.sep not in f for f in shown)
    internal = []
    tb = err.internal_traceback
    while tb is not None:
        internal.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert any(f.endswith(os.path.join("frontend", "parser.py")) for f in internal)

"""No `__syncthreads()` where some threads of the block do not reach it (they would deadlock the
others): not under a per-element `if`, not in a loop whose trip count differs between threads,
not under the guard that lets one replica group run a T.Parallel loop. A shared tile a T.Parallel
element touches only at its own address is loaded into registers before the loop and stored back
after it (no barrier needed between its statements, every replica reads it before any writes); a
dependence between elements through shared memory inside one loop is refused (TC502).
The fuzzer's programs that hung on the H100 (seeds below) are checked by their generated CUDA.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda

HANG_SEEDS = [500025, 500061, 500092, 500149, 500189, 500201, 500207, 500214, 500222, 500226,
              500240, 500268, 500315, 500348, 500364, 500370, 500381, 500392]
_UNIFORM_FOR = re.compile(r"for \(int (\w+) = 0; \1 < \d+; \+\+\1\) \{$")


def divergent_barriers(src: str) -> list[str]:
    """The barriers nested in an `if`/`else`/`while`, or in a `for` whose trip count is not a
    constant, with the heads of the blocks around them."""
    stack: list[str] = []
    bad = []
    for line in src.splitlines():
        s = line.strip()
        if "__syncthreads()" in s:
            heads = [h for h in stack if h.startswith(("if", "} else", "else", "while"))
                     or h.startswith("for") and not _UNIFORM_FOR.match(h)]
            if heads:
                bad.append(" / ".join(h[:60] for h in heads))
        opens, closes = s.count("{"), s.count("}")
        if s.startswith("}"):
            stack.pop()
            closes -= 1
            if s.endswith("{"):
                stack.append(s)
                opens -= 1
        if closes:
            del stack[len(stack) - closes:]
        stack += [s] * opens
    return bad


def element_if_shared():
    """Shared memory updated under a per-element `if` and in a per-element loop (seed 500381)."""
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((4, 16), "float32"), B: T.Tensor((4, 16), "int32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((4, 16), "float32")
            s = T.alloc_shared((4, 16), "int32")
            T.copy(A[0, 0], a)
            T.fill(s, 1)
            for i, j in T.Parallel(4, 16):
                if a[i, j] > 0:
                    s[i, j] = s[i, j] + 3
                    s[i, j] = s[i, j] * 2
                for r in T.serial(2):
                    if a[i, j] < 0.5:
                        s[i, j] = s[i, j] - r
                s[i, j] = s[i, j] + T.cast(a[i, j] * 4, "int32")
            T.copy(s, B[0, 0])
    return k


def element_if_shared_and_registers():
    """Replicas that keep registers read the shared value one replica writes (seed 500207)."""
    @tilecraft.jit
    @T.prim_func
    def k(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16, 32), "int32"),
          C: T.Tensor((16, 32), "int32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((16, 32), "float32")
            s = T.alloc_shared((16, 32), "int32")
            t = T.alloc_fragment((16, 32), "int32")
            T.copy(A[0, 0], a)
            T.fill(s, -3)
            for i, j in T.Parallel(16, 32):
                for r in T.unroll(2):
                    if a[i, j] > 0:
                        s[i, j] = s[i, j] * 2 + r
                t[i, j] = s[i, j] + 1
            T.copy(s, B[0, 0])
            T.copy(t, C[0, 0])
    return k


def test_element_private_shared_memory_has_no_barrier_under_per_element_control_flow():
    from tilecraft.block import LoadShared, ParallelCompute, StoreShared
    from tilecraft.ir import BufferLoad, BufferStore
    from tilecraft.ir.visitor import stmt_exprs, walk, walk_expr
    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.targets import H100_SXM

    for make in (element_if_shared, element_if_shared_and_registers):
        src = generate_cuda(make().func, "sm_90a").source
        assert divergent_barriers(src) == [], make.__name__
        # the elements' shared values are updated in registers, loaded before the loop (every
        # replica before any writes back) and stored after it
        body = list(walk(lowered_program(lower(make().func, H100_SXM)).body))
        (par,) = [s for s in body if isinstance(s, ParallelCompute)]
        touched = [x.buffer.scope for s in walk(par.body) for e in stmt_exprs(s)
                   for x in walk_expr(e) if isinstance(x, BufferLoad)]
        touched += [s.buffer.scope for s in walk(par.body) if isinstance(s, BufferStore)]
        assert "shared" not in touched, make.__name__
        at = body.index(par)
        assert any(isinstance(s, LoadShared) and s.src.name == "s" for s in body[:at])
        assert any(isinstance(s, StoreShared) and s.dst.name == "s" for s in body[at:])


def test_a_cross_element_shared_store_under_a_per_element_if_is_refused():
    @T.prim_func
    def k(A: T.Tensor((4, 16), "float32"), B: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((4, 16), "float32")
            s = T.alloc_shared((4, 16), "float32")
            T.copy(A[0, 0], a)
            T.fill(s, 0)
            for i, j in T.Parallel(4, 16):
                if a[i, j] > 0:
                    s[i, (j + 1) % 16] = a[i, j]
                    a[i, j] = s[i, j]
            T.copy(a, B[0, 0])

    with pytest.raises(tilecraft.TilecraftError) as e:
        generate_cuda(k, "sm_90a")
    assert e.value.code == "TC502"
    src_lines = Path(__file__).read_text().splitlines()
    assert src_lines[e.value.line - 1].strip() == "a[i, j] = s[i, j]"


def test_a_read_of_what_other_elements_of_the_loop_write_is_refused():
    """Without control flow too: the interpreter runs the first statement for every element
    before the second, and the loop has no barrier between them."""
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            a = T.alloc_fragment((64,), "float32")
            s = T.alloc_shared((64,), "float32")
            T.copy(A[0], a)
            for i in T.Parallel(64):
                s[63 - i] = a[i]
                a[i] = s[i] * 2.0
            T.copy(a, B[0])

    with pytest.raises(tilecraft.TilecraftError) as e:
        generate_cuda(k, "sm_90a")
    assert e.value.code == "TC502"
    src_lines = Path(__file__).read_text().splitlines()
    assert src_lines[e.value.line - 1].strip() == "a[i] = s[i] * 2.0"


def _fuzz_func(seed: int, tmp_path: Path):
    from tests.fuzz.gen import generate

    path = tmp_path / f"fuzz_{seed}.py"
    path.write_text(generate(seed).source)
    spec = importlib.util.spec_from_file_location(f"fuzz_{seed}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make()


@pytest.mark.parametrize("seed", HANG_SEEDS)
def test_fuzz_programs_that_hung_on_the_gpu_have_no_divergent_barrier(seed, tmp_path):
    src = generate_cuda(_fuzz_func(seed, tmp_path), "sm_90a").source
    assert divergent_barriers(src) == []


def test_the_barrier_scan_sees_a_barrier_under_an_if():
    src = ("{\n  for (int li = 0; li < 8; ++li) {\n    if (x) {\n      __syncthreads();\n"
           "    }\n  }\n}")
    assert divergent_barriers(src) == ["if (x) {"]
    assert divergent_barriers(src.replace("if (x) {", "{")) == []


_GPU_RUN = """
import numpy as np, torch
from tests.codegen.test_no_divergent_barriers import {name}
k = {name}()
rng = np.random.default_rng(0)
args = [rng.standard_normal(p.shape).astype(np.float32) if p.dtype.name == 'float32'
        else np.zeros(p.shape, np.int32) for p in k.func.params]
host = [a.copy() for a in args]
k(*host)
dev = [torch.from_numpy(a.copy()).cuda() for a in args]
k(*dev)
torch.cuda.synchronize()
for h, d in zip(host, dev):
    np.testing.assert_array_equal(d.cpu().numpy(), h)
print("ok")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["element_if_shared", "element_if_shared_and_registers"])
def test_per_element_shared_updates_finish_on_the_gpu_and_match_the_interpreter(name):
    # a deadlocked kernel cannot be interrupted in-process: run it in a child with a time limit
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _GPU_RUN.format(name=name)], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]

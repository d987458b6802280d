"""T.cumsum, T.print, T.device_assert and T.annotate_layout on the block path (lower_tile_ops,
then the block printer): the lowered program runs on the VM as the Tile IR on the interpreter
(the same values, the same printed lines, the same failing assert); the printed CUDA compiles
(NVRTC, sm_90a and sm_80, no spills) and says what the CUDA emitter's says (the interpreter's
header lines, the user's file and line in the assert, the emitter's scan forms). GPU (marked
`gpu`): the GPU tests of these ops in tests/codegen/test_debug_ops.py, with checks that the
kernel came from the block printer."""

import contextlib
import io
import re

import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tests.codegen import test_debug_ops as dbg  # the kernels of the CUDA emitter's tests
from tests.codegen import test_partial_tile_copies as partial
from tests.codegen import test_reduce_replicas as replicas
from tilecraft import interp
from tilecraft.codegen.block_cuda import print_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.ir import DeviceAssert
from tilecraft.ir.visitor import walk
from tilecraft.passes import lower
from tilecraft.passes.lower_tile_ops import lowered_program
from tilecraft.targets import H100_SXM

ARCHS = ["sm_90a", "sm_80"]
# fragments whose rows are spread over threads (the CUDA emitter refuses them): scanned in the
# scratch area
SPREAD = [("fragment_spread_rows", (64, 64, 64, 64), {"dim": 1, "scope": "fragment"}),
          ("fragment_spread_columns_reversed_in_place", (64, 96, 32, 32),
           {"dim": 0, "scope": "fragment", "reverse": True, "in_place": True})]
CUMSUMS = dbg.CUMSUM_CONFIGS + SPREAD
IDS = [c[0] for c in CUMSUMS]


def _cumsum(cfg):
    return dbg.cumsum_kernel(*cfg[1], **cfg[2])


def _program(func):
    return lowered_program(lower(func, H100_SXM))


def _source(func, arch="sm_90a") -> str:
    return print_cuda(_program(func), arch).source


def _run_both(func, args: list[np.ndarray]) -> tuple[list, list, str, str]:
    """(interpreter's arrays, VM's arrays, interpreter's stdout, VM's stdout)."""
    want, got = [a.copy() for a in args], [a.copy() for a in args]
    out_i, out_v = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_i):
        interp.run(func, want)
    program = _program(func)
    with contextlib.redirect_stdout(out_v):
        program.run(*got)
    return want, got, out_i.getvalue(), out_v.getvalue()


# ---- the VM runs the lowered program as the interpreter runs the Tile IR ---------------------

@pytest.mark.parametrize("cfg", CUMSUMS, ids=IDS)
def test_lowered_cumsum_on_the_vm_is_the_interpreters(cfg):
    _, (M, N, _, _), kw = cfg
    a = dbg.cumsum_input(M, N, kw.get("dtype", "float32")).numpy()
    want, got, _, _ = _run_both(_cumsum(cfg), [a, np.full_like(a, 7)])
    np.testing.assert_array_equal(want[1].view(np.uint8), got[1].view(np.uint8))


def test_lowered_prints_write_the_interpreters_lines():
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    want, got, text_i, text_v = _run_both(dbg.debug_kernel(), [a, np.zeros_like(a)])
    assert text_v == text_i and "[tilecraft block (1, 2)] row 100%: A[bx, 0:16] =" in text_v
    np.testing.assert_array_equal(want[1], got[1])


def test_a_failing_device_assert_raises_on_the_vm_as_on_the_interpreter():
    a = np.ones(256, dtype=np.float32)
    a[64] = -1.0  # checked by block 1
    with pytest.raises(TilecraftError) as e:
        _program(dbg.assert_kernel()).run(a, np.zeros_like(a))
    assert e.value.code == "TC402" and "(1,)" in str(e.value)


def test_an_annotated_layout_lowers_and_reduces_as_the_interpreter():
    x = np.random.default_rng(3).standard_normal((16, 32)).astype(np.float32)
    want, got, _, _ = _run_both(replicas.row_sum_over_two_lanes.func, [x, np.zeros_like(x)])
    np.testing.assert_array_equal(want[1], got[1])


# ---- the printed CUDA ----------------------------------------------------------------------

def _compiles(func, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    printed = print_cuda(_program(func), arch)
    res = compile_cuda(printed.source, arch, name=printed.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0, (res, printed.source)
    return printed.source


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cfg", CUMSUMS, ids=IDS)
def test_printed_cumsum_compiles_without_spills(cfg, arch):
    src = _compiles(_cumsum(cfg), arch)
    assert ("// cumsum" in src) == (cfg[2].get("scope") != "local")  # (local: scalar code)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("make", [dbg.debug_kernel, dbg.assert_kernel,
                                  lambda: dbg.assert_kernel(use_statement=True),
                                  lambda: partial.shared_tile_at_odd_negative_column().func,
                                  lambda: replicas.row_sum_over_two_lanes.func],
                         ids=["prints", "device_assert", "assert", "cumsum_at_odd_column",
                              "annotate_layout"])
def test_printed_debug_kernels_compile_without_spills(make, arch):
    _compiles(make(), arch)


def _config(name):
    return next(c for c in CUMSUMS if c[0] == name)


def test_cumsum_takes_the_emitters_forms():
    """Rows in one thread's registers: straight-line code; else through the scratch area, a
    warp per row for few long rows, a thread per row otherwise."""
    regs = _source(_cumsum(_config("fragment_rows_in_registers")))
    assert "// a row of 4 registers" in regs and "stage0" not in regs
    warp = _source(_cumsum(_config("shared_warp_per_row_tail")))
    assert "tc::warp_inclusive_scan" in warp and "#include \"tilecraft/scan.cuh\"" in warp
    rows = _source(_cumsum(_config("shared_thread_per_row")))
    assert "for (int kk = 0; kk < 16; ++kk)" in rows and "warp_inclusive_scan" not in rows
    assert "double acc" in _source(dbg.cumsum_kernel(8, 32, 8, 32, dtype="float64"))
    assert "tc::i64 acc" in _source(_cumsum(_config("shared_int32_columns")))


def test_print_headers_are_the_interpreters_lines(capsys):
    func = dbg.debug_kernel()
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    interp.run(func, [a, np.zeros_like(a)])
    lines = capsys.readouterr().out.splitlines()
    formats = [f.replace("\\n", "") for f in
               re.findall(r'printf\("((?:[^"\\]|\\.)*)"', _source(func))]
    headers = [f.replace("%%", "%") for f in formats if f.endswith(("=", "= %g"))]
    assert len(headers) == 5
    for bx in range(2):
        for by in range(3):
            for f in headers:
                if f.endswith("%g"):  # the scalar line: the same text up to the value
                    want = f[: -len("%g")].replace("%d", "{}").format(bx, by)
                    assert any(line.startswith(want) for line in lines), want
                else:
                    assert f.replace("%d", "{}").format(bx, by) in lines


def test_memory_tiles_print_in_rows_of_eight_and_fragments_per_thread():
    src = _source(dbg.debug_kernel(M=4))  # F: 64 elements on 128 threads (2 replicas)
    assert src.count(r'[%d, %d:%d] %g %g %g %g %g %g %g %g\n"') == 1  # S, from thread 0
    assert src.count(r'[%d:%d] %g %g %g %g %g %g %g %g\n"') == 1  # A[bx, 0:16], gathered
    frag = src.split("// print F")[1].split("// print")[0]
    assert r'thread %d]   [%d, %d] %g\n"' in frag
    assert "if ((tid / 64) == 0)" in frag  # one thread of each replica group
    local = src.split("// T.print L")[1]
    assert r'[0:4] %lld %lld %lld %lld\n"' in local  # thread 0's own copy


def test_a_thread_dependent_scalar_prints_from_every_thread():
    src = _source(_per_thread)
    lines = [ln.strip() for ln in src.splitlines() if "printf" in ln]
    assert lines[0].startswith('printf("[tilecraft block (%d,) thread %d] twice: ')
    assert lines[1].startswith('if (tid == 0) printf("[tilecraft block (%d,)] block: bx + 1 = ')


@T.prim_func
def _per_thread(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        T.print(tx * 2, "twice")
        T.print(bx + 1, "block")


@pytest.mark.parametrize("use_statement", [False, True], ids=["T.device_assert", "assert"])
def test_device_assert_names_the_users_file_and_line(use_statement):
    func = dbg.assert_kernel(use_statement=use_statement)
    src = _source(func)
    (op,) = [s for s in walk(_program(func).body) if isinstance(s, DeviceAssert)]
    file, line = dbg.__file__, op.span.line
    assert f'__assertfail("A must be non-negative", "{file}", {line}, ' in src
    assert f"device assertion failed: A must be non-negative at {file}:{line}" in src


# ---- on the GPU -------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CUMSUMS, ids=IDS)
def test_cumsum_on_the_block_path_matches_torch(cfg):
    kernel = tilecraft.compile(_cumsum(cfg), target="cuda")
    assert "from the block program" in kernel.get_kernel_source()
    dbg.test_cumsum_on_cuda_matches_torch(cfg)


@pytest.mark.gpu
def test_cumsum_at_an_odd_negative_column_on_the_block_path():
    partial.test_gpu_copies_starting_before_the_tensor_match_the_interpreter(
        partial.shared_tile_at_odd_negative_column)


@pytest.mark.gpu
def test_passing_device_assert_on_the_block_path():
    dbg.test_passing_device_assert_leaves_the_result_alone()


@pytest.mark.gpu
def test_failing_device_assert_on_the_block_path_raises_and_names_the_line():
    dbg.test_failing_device_assert_raises_in_torch_and_names_the_line()


@pytest.mark.gpu
def test_print_on_the_block_path_writes_every_blocks_lines():
    dbg.test_print_on_cuda_writes_every_blocks_lines()


@pytest.mark.gpu
def test_annotated_layout_on_the_block_path_gives_every_element_of_a_row_one_sum():
    import torch

    kernel = tilecraft.compile(replicas.row_sum_over_two_lanes.func, target="cuda")
    assert "from the block program" in kernel.get_kernel_source()
    x = replicas._x(16, 32)
    y = torch.zeros(16, 32, device="cuda")
    kernel(x.cuda(), y)
    assert (y == y[:, :1]).all(), (y.min(1), y.max(1))
    torch.testing.assert_close(y[:, 0].double().cpu(), x.double().sum(1), rtol=1e-5, atol=1e-3)

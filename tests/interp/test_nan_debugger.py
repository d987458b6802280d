"""The NaN debugger (`debug_nans=True`, `TILECRAFT_DEBUG_NANS=1`): the interpreter stops at the
first statement that makes a NaN or an inf from values that had none (TC404, at that line, with
the element, the block and the operand values); NaN that comes in through the inputs, and
kernels that make none, run as before."""

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError
from tilecraft.interp import machine as interp_machine

from .attention_kernels import paper_flash_attention

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

import flash_attention as fa_example  # noqa: E402


def marked_line(obj, tag: str = "# NAN") -> int:
    lines, first = inspect.getsourcelines(obj)
    hits = [first + i for i, ln in enumerate(lines) if tag in ln]
    assert len(hits) == 1, hits
    return hits[0]


def run_debug(func, *inputs, out_idx=-1, **kw):
    return tilecraft.compile(func, out_idx=[out_idx], target="interp", debug_nans=True, **kw)(
        *inputs)


def raises_tc404(func, *inputs) -> TilecraftError:
    with pytest.raises(TilecraftError) as info:
        run_debug(func, *inputs)
    assert info.value.code == "TC404"
    return info.value


def _qkv(seq_len=128, dim=16):
    return [torch.randn(1, seq_len, 1, dim, dtype=torch.float16) for _ in range(3)]


# ---- the TileLang paper's FlashAttention -----------------------------------------------------
def test_paper_flash_attention_makes_nan_on_fully_masked_rows():
    """The listing as printed (block_M=128 > block_N=64, causal) gives NaN rows silently."""
    kernel = tilecraft.compile(paper_flash_attention(1, 1, 128, 16, True), out_idx=[3],
                               target="interp")
    out = kernel(*_qkv())
    rows_with_nan = out[0, :, 0].isnan().any(-1)
    assert rows_with_nan[:64].all() and not rows_with_nan[64:].any()


def test_debugger_names_the_exp2_line_of_paper_flash_attention_and_why():
    e = raises_tc404(paper_flash_attention(1, 1, 128, 16, True), *_qkv())
    assert e.line == marked_line(paper_flash_attention)
    assert e.file.endswith("attention_kernels.py")
    assert e.fields["value"] == "NaN"
    assert "-inf - -inf" in e.message and "T.exp2(x)" in e.message
    assert "acc_s[0, 0] = -inf" in e.message and "scores_max[0] = -inf" in e.message
    assert "at acc_s[0, 0] (i = 0, j = 0) in block (0, 0, 0), k = 1" in e.message
    text = str(e)
    assert text.startswith("error[TC404]: NaN produced")
    assert "T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)" in text  # the source line
    assert "inf - inf is NaN" in e.hint


def test_env_variable_turns_the_debugger_on(monkeypatch):
    func = paper_flash_attention(1, 1, 128, 16, True)
    kernel = tilecraft.compile(func, out_idx=[3], target="interp")
    monkeypatch.setenv("TILECRAFT_DEBUG_NANS", "1")
    with pytest.raises(TilecraftError) as info:
        kernel(*_qkv())
    assert info.value.code == "TC404" and info.value.line == marked_line(paper_flash_attention)


def test_jit_keyword_turns_the_debugger_on():
    factory = tilecraft.jit(paper_flash_attention, out_idx=[3], target="interp", cache=False,
                            debug_nans=True)
    with pytest.raises(TilecraftError) as info:
        factory(1, 1, 128, 16, True)(*_qkv())
    assert info.value.code == "TC404" and info.value.line == marked_line(paper_flash_attention)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_guarded_flash_attention_runs_unchanged_with_the_debugger(is_causal):
    func = fa_example.flash_attention(1, 2, 256, 32, is_causal, block_M=128, block_N=64).func
    q, k, v = [torch.randn(1, 256, 2, 32, dtype=torch.float16) for _ in range(3)]
    plain = tilecraft.compile(func, out_idx=[3], target="interp")(q, k, v)
    debug = run_debug(func, q, k, v, out_idx=3)
    assert not debug.isnan().any()
    assert torch.equal(plain, debug)


def test_the_check_is_not_consulted_when_off(monkeypatch):
    def fail(*_):
        raise AssertionError("nan_check.before called with the debugger off")

    monkeypatch.setattr(interp_machine.nan_check, "before", fail)
    monkeypatch.delenv("TILECRAFT_DEBUG_NANS", raising=False)
    out = tilecraft.compile(paper_flash_attention(1, 1, 128, 16, True), out_idx=[3],
                            target="interp")(*_qkv())
    assert out.isnan().any()


# ---- element-wise statements -----------------------------------------------------------------
def exp2_of_difference(dtype="float32"):
    @T.prim_func
    def k(A: T.Tensor((8,), dtype), B: T.Tensor((8,), dtype), C: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                C[i] = T.exp2(A[i] - B[i])  # NAN

    return k


def test_nan_and_inf_from_the_inputs_are_not_reported():
    a = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0, 2, 3, 4])
    b = torch.tensor([0.0, 1.0, 1.0, 1.0, float("nan"), 0, 0, 0])
    out = run_debug(exp2_of_difference(), a, b)
    assert out[1].isnan() and out[4].isnan() and out[2] == float("inf") and out[3] == 0


def test_inf_minus_inf_from_the_inputs_is_reported_where_it_is_computed():
    a = torch.tensor([1.0, 2, 3, 4, 5, float("inf"), 7, 8])
    b = torch.tensor([0.0, 1, 2, 3, 4, float("inf"), 6, 7])
    e = raises_tc404(exp2_of_difference(), a, b)
    assert e.line == marked_line(exp2_of_difference)
    assert "at C[5] (i = 5) in block (0,)" in e.message
    assert "x = `A[i] - B[i]` is inf - inf, where A[5] = inf, B[5] = inf" in e.message


def test_overflow_of_a_finite_exponent_is_an_inf():
    a = torch.tensor([1.0, 2, 300, 4, 5, 6, 7, 8])
    e = raises_tc404(exp2_of_difference(), a, torch.zeros(8))
    assert e.fields["value"] == "inf" and "C[2]" in e.message
    assert "`T.exp2(A[i] - B[i])` is T.exp2(300)" in e.message and "overflows" in e.hint


def division():
    @T.prim_func
    def k(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32"),
          C: T.Tensor((4, 8), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i, j in T.Parallel(2, 8):
                if B[bx * 2 + i, j] != 0:
                    C[bx * 2 + i, j] = A[bx * 2 + i, j] / B[bx * 2 + i, j]  # NAN
                else:
                    C[bx * 2 + i, j] = T.if_then_else(A[bx * 2 + i, j] > 0, 1.0 / B[0, 0], 0.0)

    return k


def test_masked_and_unselected_elements_do_not_count():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    b[1, 3] = b[2, 5] = 0
    a[1, 3] = a[2, 5] = -1.0
    b[0, 0] = 1.0
    out = run_debug(division(), a, b)
    assert out[1, 3] == 0 and out[2, 5] == 0


def test_division_by_zero_names_element_and_block():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    a[3, 6], b[3, 6] = 2.0, 1e-45  # a subnormal: nonzero, so the `if` lets it through
    e = raises_tc404(division(), a, b)
    assert e.line == marked_line(division)
    assert "at C[3, 6] (i = 1, j = 6) in block (1,)" in e.message
    assert "is 2 / 1.4013e-45" in e.message


def store_to_half():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(16):
                C[i] = A[i] * 2  # NAN

    return k


def test_store_that_overflows_the_buffer_type():
    a = torch.ones(16)
    a[9] = 40000.0
    e = raises_tc404(store_to_half(), a)
    assert e.line == marked_line(store_to_half)
    assert "at C[9] (i = 9)" in e.message and "is 80000 converted to float16" in e.message
    assert "largest finite 65504" in e.hint


def scalar_let():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for t in T.serial(4):
                r = T.log(A[t])  # NAN
                C[t] = r * 0

    return k


def test_let_in_serial_code_reports_the_loop_iteration():
    e = raises_tc404(scalar_let(), torch.tensor([1.0, 2.0, -3.0, 4.0]))
    assert e.line == marked_line(scalar_let)
    assert e.message.startswith("NaN produced for `r` in block (0,), t = 2")
    assert "T.log(-3)" in e.message and "outside the domain of T.log" in e.hint


# ---- tile ops --------------------------------------------------------------------------------
def tile_ops(kind: str):
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
          C: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((16, 16), "float16")
            B_s = T.alloc_shared((16, 16), "float16")
            acc = T.alloc_fragment((16, 16), "float32")
            row = T.alloc_fragment((16,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            if kind == "reduce":
                for i, j in T.Parallel(16, 16):
                    acc[i, j] = A_s[i, j] * 1.0
                T.reduce_sum(acc, row, dim=1)  # REDUCE
                for i, j in T.Parallel(16, 16):
                    acc[i, j] = row[i]
            else:
                T.gemm(A_s, B_s, acc, clear_accum=True)  # GEMM
            if kind == "copy":
                for i, j in T.Parallel(16, 16):
                    acc[i, j] = acc[i, j] * 256.0
            T.copy(acc, C)  # COPY

    return k


def test_gemm_reports_inf_times_zero():
    a, b = torch.randn(16, 16, dtype=torch.float16), torch.randn(16, 16, dtype=torch.float16)
    a[2, 5], b[5, :] = float("inf"), 0
    e = raises_tc404(tile_ops("gemm"), a, b)
    assert e.line == marked_line(tile_ops, "# GEMM")
    assert e.fields["value"] == "NaN" and "T.gemm: " in e.message
    assert "at acc[2, 0] in block (0,)" in e.message and "row 2 of `A_s` has inf at 5" in e.message


def test_reduce_reports_the_row():
    a = torch.randn(16, 16, dtype=torch.float16)
    a[3, 1], a[3, 7] = float("inf"), -float("inf")
    e = raises_tc404(tile_ops("reduce"), a, torch.randn(16, 16, dtype=torch.float16))
    assert e.line == marked_line(tile_ops, "# REDUCE")
    assert "at row[3]" in e.message and "inf at position 1, -inf at position 7" in e.message


def test_copy_to_half_reports_overflow():
    a = torch.zeros(16, 16, dtype=torch.float16)
    b = torch.eye(16, dtype=torch.float16)
    a[4, 9] = 1000.0  # * 256 = 256000: no float16
    e = raises_tc404(tile_ops("copy"), a, b)
    assert e.line == marked_line(tile_ops, "# COPY")
    assert "at C[4, 9]" in e.message and "256000 from `acc` becomes inf in float16" in e.message


def test_tile_ops_with_finite_values_run_unchanged():
    a, b = torch.randn(16, 16, dtype=torch.float16), torch.randn(16, 16, dtype=torch.float16)
    for kind in ("gemm", "reduce", "copy"):
        func = tile_ops(kind)
        plain = tilecraft.compile(func, out_idx=[2], target="interp")(a, b)
        assert torch.equal(plain, run_debug(func, a, b))
        assert np.isfinite(plain.float().numpy()).all()


def test_taken_side_of_if_then_else_counts():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    a[0, 0], b[0, 0] = -1.0, 0.0  # else branch, the 0.0 side
    a[1, 3], b[1, 3] = 1.0, 0.0  # else branch, the 1.0 / B[0, 0] side
    e = raises_tc404(division(), a, b)
    assert e.fields["value"] == "inf"
    assert "at C[1, 3] (i = 1, j = 3) in block (0,)" in e.message
    assert "gets x = inf; x = `1.0 / B[0, 0]` is 1 / 0, where B[0, 0] = 0" in e.message

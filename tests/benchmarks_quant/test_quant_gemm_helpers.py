"""benchmarks/quant_gemm.py's helpers on the CPU: the error measure, the output check, the
operands it builds for torch's int4 kernel (torch's int4mm.cu layout), the row plans of
--quick / default / --full, and its correctness pass on the interpreter at tiny shapes."""

import importlib.util
import math
import sys
import time
from pathlib import Path

import pytest
import torch

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "quant_gemm.py"
_spec = importlib.util.spec_from_file_location("quant_gemm_bench", _PATH)
qg = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # its dataclass needs it
_spec.loader.exec_module(qg)


def test_rel_err_is_zero_for_equal_tensors_small_for_rounding_and_inf_for_nan():
    ref = torch.randn(3, 64, dtype=torch.float64)
    assert qg.rel_err(ref.clone(), ref) == 0.0
    assert 1e-4 < qg.rel_err(ref.half(), ref) < 1e-3
    bad = ref.clone()
    bad[1, 5] = math.nan
    assert qg.rel_err(bad, ref) == math.inf


def test_check_fails_on_wrong_shape_wrong_dtype_large_error_and_nan():
    ref = torch.randn(2, 8, dtype=torch.float64)
    assert qg.check(ref.half(), ref, torch.float16)[1] == ""
    assert "shape" in qg.check(ref.half()[:, :4], ref, torch.float16)[1]
    assert "dtype" in qg.check(ref.bfloat16(), ref, torch.float16)[1]
    assert "rel err" in qg.check((ref * 1.1).half(), ref, torch.float16)[1]
    assert "NaN" in qg.check(torch.full_like(ref, math.nan).half(), ref, torch.float16)[1]
    assert "returned" in qg.check(None, ref, torch.float16)[1]


def test_int4_codes_reconstruct_the_weight_within_half_a_step():
    torch.manual_seed(0)
    w = torch.randn(16, 256)
    q, scale, zero, value = qg.int4_codes(w, group=128)
    assert q.dtype == torch.uint8 and q.shape == (16, 256) and int(q.max()) <= 15
    assert scale.shape == zero.shape == (16, 2) and scale.dtype == torch.bfloat16
    step = scale.float().repeat_interleave(128, dim=1)
    # half a step of rounding, plus the bf16 rounding of scale and zero (8 steps of 2^-8 each)
    assert bool(((value - w).abs() <= step * (0.5 + 9 * 2**-8) + 1e-6).all())
    want = (q.float() - 8) * step + zero.float().repeat_interleave(128, dim=1)
    assert torch.equal(value, want)


def test_int4_operands_put_the_even_element_in_the_high_nibble_and_groups_first():
    q = torch.randint(0, 16, (8, 256), dtype=torch.uint8)
    scale, zero = torch.rand(8, 2).bfloat16(), torch.rand(8, 2).bfloat16()
    nibbles, sz = qg.int4_operands(q, scale, zero)
    assert nibbles.shape == (8, 128) and nibbles.dtype == torch.uint8
    assert torch.equal(nibbles >> 4, q[:, 0::2]) and torch.equal(nibbles & 15, q[:, 1::2])
    assert sz.shape == (2, 8, 2) and sz.is_contiguous()
    assert torch.equal(sz[:, :, 0], scale.T) and torch.equal(sz[:, :, 1], zero.T)


def _rows(argv):
    return [(shape, t, a, m) for shape, t, a, ms in qg.plan(qg.parse(argv)) for m in ms]


def test_quick_plan_is_the_headline_shape_at_decode_for_six_types_and_uint4_bf16():
    rows = _rows(["--quick"])
    assert {r[0] for r in rows} == {(28672, 8192)} and {r[3] for r in rows} == {1, 16}
    assert {(t, a) for _, t, a, _ in rows} == {(t, "f16") for t in qg.QUICK_TYPES} | {
        ("uint4", "bf16")}


def test_default_plan_runs_m_over_16_only_on_8192_squared_and_full_runs_everything():
    default, full = _rows([]), _rows(["--full"])
    assert {r[0] for r in default if r[3] > 16} == {(8192, 8192)}
    assert {r[3] for r in default} == set(qg.MS)
    assert len(full) == (len(qg.TYPES) + 1) * len(qg.MS) * len(qg.SHAPES) == 280
    assert len(default) == (len(qg.TYPES) + 1) * (2 * len(qg.SHAPES) + 2) == 168
    assert {r[3] for r in _rows(["--m", "4096", "--shapes", "57344x8192"])} == {4096}


def test_plan_refuses_an_unknown_type():
    with pytest.raises(SystemExit, match="unknown --types"):
        qg.plan(qg.parse(["--types", "uint9"]))


class _FakeQuant:
    """The contract of tilecraft.quant (quantize -> .dequantize/.packed/.scales/.zeros, matmul)
    with a matmul that is off by `factor` or raises: the benchmark's plumbing without the API."""

    def __init__(self, factor=1.0, error=None):
        self.factor, self.error = factor, error

    def quantize(self, w, dtype, group_size=128, scale_dtype="float16"):
        qw = type("QW", (), {})()
        qw.w = w.float().round()
        qw.packed = torch.zeros(w.numel() // 2, dtype=torch.uint8)
        qw.scales, qw.zeros = torch.ones(w.shape[0], w.shape[1] // group_size).half(), None
        qw.dequantize = lambda: qw.w
        return qw

    def matmul(self, x, qw):
        if self.error:
            raise self.error
        return (x.float() @ qw.w.T * self.factor).to(x.dtype)


def test_check_impls_passes_a_right_matmul_and_names_a_wrong_or_raising_one():
    w = torch.randn(32, 256).half()
    for fake, want in ((_FakeQuant(), {}), (_FakeQuant(factor=1.05), "rel err"),
                       (_FakeQuant(error=ValueError("TC321 no")), "ValueError: TC321 no")):
        impls, nbytes, _ = qg.build_impls(w, "uint4", fake)
        assert nbytes == {"ours": 32 * 128 + 32 * 2 * 2, "cublas": 32 * 256 * 2}
        errs, fails, _ = qg.check_impls(impls, 3, 256, 32, torch.float16, "cpu")
        assert "cublas" not in fails and errs["cublas"] < 1e-3
        assert fails == want if want == {} else want in fails["ours"]


def _row(wtype, M, N, ours, cublas, int4=None, act="f16"):
    us = {"ours": ours, "cublas": cublas} | ({"int4": int4} if int4 else {})
    return qg.Row(wtype, act, M, N, 8192, err={"ours": 1e-3, "cublas": 1e-4}, us=us,
                  nbytes={"ours": N * 8192 // 2, "cublas": N * 8192 * 2})


def test_report_lines_and_summary_show_ratios_targets_and_failures(capsys):
    rows = [_row("uint4", 1, 28672, 40.0, 176.0, int4=70.0, act="bf16"),
            _row("uint4", 16, 28672, 60.0, 176.0, int4=267.0, act="bf16"),
            _row("uint2", 1, 28672, 40.0, 176.0), _row("uint2", 4096, 8192, 1000.0, 800.0),
            qg.Row("uint8", "f16", 1, 28672, 8192, fail="ours: rel err 3.0e-01 >= 0.01")]
    text = qg.line(rows[0], 3000.0)
    assert "40.0" in text and "4.40" in text and "1.75" in text and "2936" in text
    assert "FAIL" in qg.line(rows[-1], 3000.0)
    qg.summary(rows)
    out = {ln.split()[0] + ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines()
           if ln.startswith("uint")}
    assert out["uint4bf16"].endswith("miss 2.93<3.5")
    assert "4.40<5.5" in out["uint2f16"] and "M4096 0.80<0.85" in out["uint2f16"]
    assert out["uint8f16"].endswith("FAIL (1 rows)")


class _CpuTimer:
    """Timer's interface without CUDA: host clock, one call per rep."""

    def __init__(self, flush):
        self.peak = 3000.0

    def host_us(self, fn, n=10):
        return 1.0

    def us(self, fn, reps, host_us):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t) / reps * 1e6


def _dry_run(monkeypatch, fake, argv):
    monkeypatch.setattr(qg, "DEVICE", "cpu")
    monkeypatch.setattr(qg, "Timer", _CpuTimer)
    monkeypatch.setattr(qg, "copy_gbps", lambda: 3000.0)
    monkeypatch.setattr(qg, "header", lambda timer, args: None)
    monkeypatch.setattr(qg, "load_quant", lambda: fake)
    monkeypatch.setattr(qg, "SHAPES", [(64, 256)] + qg.SHAPES)
    qg.main(["--shapes", "64x256", "--m", "1,3", *argv])


def test_the_sweep_dry_run_prints_a_row_per_case_a_summary_and_a_csv(monkeypatch, capsys, tmp_path):
    _dry_run(monkeypatch, _FakeQuant(), ["--types", "uint4,int8", "--csv", str(tmp_path / "q.csv")])
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith(("uint4 ", "int8 "))]
    assert [(r[0], r[1], r[2]) for r in rows[:6]] == [
        ("uint4", "f16", "1"), ("uint4", "f16", "3"), ("uint4", "bf16", "1"),
        ("uint4", "bf16", "3"), ("int8", "f16", "1"), ("int8", "f16", "3")]
    assert all(float(r[5]) > 0 and r[-1] != "FAIL" for r in rows[:6]) and "FAIL" not in out
    assert "6 rows in" in out and "summary" in out
    lines = (tmp_path / "q.csv").read_text().splitlines()
    assert len(lines) == 7 and lines[0].startswith("type,act,M,N,K,t_s,fail")


def test_the_sweep_dry_run_prints_fail_and_no_time_for_a_wrong_matmul(monkeypatch, capsys):
    _dry_run(monkeypatch, _FakeQuant(factor=1.05), ["--types", "int4"])
    out = capsys.readouterr().out
    assert out.count("!!!! FAIL ours int4 f16") == 2
    rows = [ln for ln in out.splitlines() if ln.startswith("int4 ")]
    assert len(rows) == 3 and all("FAIL" in r for r in rows)  # M=1, M=3, and the summary


def _api():
    from tilecraft import quant

    if not (hasattr(quant, "quantize") and hasattr(quant, "matmul")):
        pytest.skip("tilecraft.quant.quantize/matmul not there yet")
    try:
        from tilecraft.quant.qmm import quant_matmul  # noqa: F401
    except ImportError:
        pytest.skip("tilecraft.quant.qmm.quant_matmul (the kernel entry) not there yet")
    return quant


@pytest.mark.parametrize("wtype,act", [("uint4", "f16"), ("int4", "bf16"), ("float4_e2m1", "f16")])
def test_the_benchmarks_correctness_pass_accepts_ours_and_cublas_on_the_interpreter(wtype, act):
    quant = _api()
    torch.manual_seed(0)
    N, K, dt = 64, 256, qg.ACTS[act]
    impls, nbytes, note = qg.build_impls(torch.randn(N, K).to(dt), wtype, quant)
    assert set(impls) == {"ours", "cublas"} and note == ""
    assert nbytes["ours"] == N * K // 2 + 2 * N * (K // 128) * (2 if wtype == "uint4" else 1)
    for M in (1, 3):
        errs, fails, x = qg.check_impls(impls, M, K, N, dt, "cpu")
        assert fails == {} and x.shape == (M, K)
        assert errs["ours"] < 1e-2 and errs["cublas"] < 1e-2

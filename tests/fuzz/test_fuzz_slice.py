"""A fixed-seed slice of the differential fuzzer (tests/fuzz/README.md), plus checks that the
fuzzer's own model is right and that it notices a wrong result.

The slice runs 40 random programs on the interpreter against the numpy model and compiles each
for sm_90a and sm_80 through NVRTC: no mismatch, no internal exception, no register spill.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from . import dtypes as D
from . import values as M
from .gen import generate
from .shrink import shrink
from .work import check

SLICE = range(40)
PER_PROGRAM_S = 60


def test_float_rounding_matches_numpy_and_ml_dtypes():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(4000) * 10.0 ** rng.integers(-9, 6, 4000),
                        [65519.0, 65520.0, 2.0 ** -25, 3 * 2.0 ** -26, -0.0, 1e-30]])
    assert np.array_equal(D.round_float(x, D.ALL["float16"]), x.astype(np.float16).astype(float))
    x32 = x.astype(np.float32).astype(np.float64)  # ml_dtypes rounds float32 sources once
    want = x32.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.array_equal(D.round_float(x32, D.ALL["bfloat16"]), want)
    assert np.array_equal(D.round_float(x, D.ALL["float32"]), x.astype(np.float32).astype(float))


def test_integer_semantics_wrap_floor_and_convert():
    i8, u32, f16 = D.ALL["int8"], D.ALL["uint32"], D.ALL["float16"]
    a, b = M.exact([-7, 7, -128, 100], i8), M.exact([2, -2, -1, 100], i8)
    assert list(M.binop("//", a, b).v) == [-4, -4, -128, 1]
    assert list(M.binop("%", a, b).v) == [1, -1, 0, 0]
    assert list(M.binop("/", a, b).v) == [-3, -3, -128, 1]
    assert list(M.binop("*", a, b).v) == [-14, -14, -128, 16]
    assert list(M.unary("abs", a).v) == [7, 7, -128, 100]
    assert list(M.cast(M.exact([-1, 2 ** 40], D.ALL["int64"]), u32).v) == [2 ** 32 - 1, 0]
    assert list(M.cast(M.exact([-3.9, 1e10, 70000.0], D.ALL["float32"]), i8).v) == [-3, 127, 127]
    assert list(M.cast(M.exact([2049, 65520], D.ALL["int32"]), f16).v) == [2048.0, np.inf]


def test_fuzzer_reports_a_planted_wrong_result(tmp_path):
    """Programs with one `//` turned into `/` in the source (the model keeps `//`) must be
    reported: the check can fail."""
    flagged = tried = 0
    for seed in range(300):
        prog = generate(seed)
        src = prog.source
        m = re.search(r"\) // ", src)
        if m is None:
            continue
        tried += 1
        out = check(prog, "interp", tmp_path, source=src[:m.start()] + ") / " + src[m.end():])
        flagged += out.status == "mismatch"
        if tried == 60:
            break
    assert tried == 60 and flagged >= 4, (tried, flagged)


def test_shrinker_keeps_the_failure_and_drops_the_rest(tmp_path, monkeypatch):
    """With the model's integer `//` made C's truncation, a program that divides negative
    numbers mismatches; shrinking keeps a `//` and the mismatch, and drops most of the rest."""
    floor = M.binop

    def truncating(op, a, b):
        return floor("/" if op == "//" and not a.t.is_float else op, a, b)

    monkeypatch.setattr(M, "binop", truncating)
    for seed in range(300):
        prog = generate(seed)
        if check(prog, "interp", tmp_path).status == "mismatch":
            break
    else:
        raise AssertionError("no program divides negative integers")
    small = shrink(prog, lambda p: check(p, "interp", tmp_path).status == "mismatch", budget=150)
    assert check(small, "interp", tmp_path).status == "mismatch"
    assert " // " in small.source and len(small.source) < len(prog.source) * 0.8


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@pytest.mark.parametrize("mode", ["interp", "compile"])
def test_fuzz_slice(mode, tmp_path):
    """Seeds 0..39 with every feature on (`python -m tests.fuzz.run --count 40 --seed 0
    --mode compile` shows the same programs)."""
    if mode == "compile":
        pytest.importorskip("cuda.bindings.nvrtc")
    failures, refused = [], 0
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for seed in SLICE:
            signal.alarm(PER_PROGRAM_S)
            try:
                out = check(generate(seed), mode, Path(tmp_path))
            except _Hang:
                failures.append(f"seed {seed}: no result after {PER_PROGRAM_S} s")
                continue
            finally:
                signal.alarm(0)
            refused += out.status == "refused"
            if out.status not in ("pass", "refused"):
                worst = [e for e in out.events if e[0] == out.status][0]
                failures.append(f"seed {seed}: {out.status} in {worst[1]}: {worst[3][:300]}")
    finally:
        signal.signal(signal.SIGALRM, old)
    assert not failures, "\n".join(failures)
    assert refused < len(SLICE) // 2  # most programs run (the slice is not all refusals)


def test_fuzz_slice_with_the_optional_rewrites_everywhere(tmp_path, monkeypatch):
    """The slice compiled with `--stress`'s thresholds (run.py `stress`): forward_copies and
    asynchronous weight copies take every program they legally can; the VM still computes what
    the interpreter does, and some programs are forwarded (the test is not vacuous)."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.passes import block_passes

    from .run import stress

    stress(monkeypatch.setattr)
    real, forwarded = block_passes._forward_copies, []

    def counting(program):
        out = real(program)
        forwarded.append(out is not program)
        return out
    monkeypatch.setattr(block_passes, "_forward_copies", counting)
    failures = []
    for seed in SLICE:
        out = check(generate(seed), "compile", Path(tmp_path))
        if out.status not in ("pass", "refused"):
            worst = [e for e in out.events if e[0] == out.status][0]
            failures.append(f"seed {seed}: {out.status} in {worst[1]}: {worst[3][:300]}")
    assert not failures, "\n".join(failures)
    assert sum(forwarded) >= 2, forwarded


def test_fuzz_slice_with_every_split_taken(tmp_path, monkeypatch):
    """GEMM programs on aligned shapes (`--only gemm --no partial,odd_shapes`), lowered with
    TILECRAFT_WS=always: the block VM runs every warp-specialized loop against the
    interpreter, and some loops do split (the test is not vacuous)."""
    from tilecraft.passes import pipeline_copies

    from .features import parse

    monkeypatch.setenv("TILECRAFT_WS", "always")
    real, splits = pipeline_copies.specialized, []

    def counting(*args, **kwargs):
        splits.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(pipeline_copies, "specialized", counting)
    feats = parse(no="partial,odd_shapes", only="gemm")
    failures = []
    for seed in range(30600000, 30600120):
        out = check(generate(seed, feats), "interp", Path(tmp_path))
        if out.status not in ("pass", "refused"):
            worst = [e for e in out.events if e[0] == out.status][0]
            failures.append(f"seed {seed}: {out.status} in {worst[1]}: {worst[3][:300]}")
    assert not failures, "\n".join(failures)
    assert len(splits) >= 5, len(splits)

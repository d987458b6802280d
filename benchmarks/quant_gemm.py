"""Quantized matmul: tilecraft.quant.matmul against cuBLAS and torch's int4 kernel, one process.

Y = X @ dequant(W).T: X (M, K) float16 (and bfloat16 for uint4, the rows torch's int4 kernel
runs on), W (N, K) quantized per group of 128 along K. The peers run on the same inputs: cuBLAS
(`x @ w.T`, w the dequantized weight in X's type) and, for bf16 X, torch's tinygemm int4 kernel
(`_weight_int4pack_mm`, group 128, the same float weight quantized its own way).

Correct first: each implementation's output is checked on two fresh random inputs against a
float64 reference from the weight it computes with (rel err < 1e-2, no NaN); each output's
allocator block is filled with NaN first (none of the calls takes an output tensor, so an
unwritten element most likely reads NaN). A failing row prints FAIL and is not timed.
Timing: CUDA events around each call, median of the calls, the three implementations in
alternating rounds (median of the rounds' medians). Before each call the L2 is flushed (a
256 MiB read; the H100's L2 is 50 MiB and weights of 2-32 MiB would otherwise be read from it;
--no-flush times them hot; a flush by writing would leave up to 50 MiB of dirty lines whose
write-back lands in the timed call: about 15 us on the decode shapes, for every implementation
alike) and a spin kernel holds the GPU while the host enqueues the call, so
the host's launch time stays out of the number. GB/s = weight bytes (packed codes + scales +
zeros) / time; "%copy" against a device-to-device copy measured here (bytes read + written).

Usage: PYTHONPATH=$PWD python3 benchmarks/quant_gemm.py [--quick | --full] [--types uint4,int4]
         [--m 1,16] [--shapes 28672x8192,8192x8192] [--act f16,bf16] [--no-flush]
         [--minutes 4.5] [--csv PATH]
  default  every type; M 1/16 on every shape, M 128/4096 on 8192x8192 only (168 rows)
  --quick  M 1/16, 28672x8192, uint4 int4 float4_e2m1 uint8 uint2 uint1 (14 rows)
  --full   every M on every shape (280 rows: run it in parts with --types or --shapes, it
           outlasts one 10-min call)
  --m / --shapes / --types / --act select exactly those (--m lifts the default's M rule)
  --minutes  no new weight is started after this many minutes (4.5; 9.5 with --full)
Rows run in the order of SHAPES (the issue's headline shape first); the weights a time guard
left out are listed at the end. A CSV of every number (t_s: seconds since the start, compiles
included) goes to --csv or, when $OUT is set, to $OUT/quant_gemm.csv.
Each (type, M, N, K) compiles its own kernel on first use: that, not the timing, is most of the
run time (timing: ~0.1-0.3 s a row; a cold compile ~0.5-1 s).
"""

from __future__ import annotations

import argparse
import csv
import inspect
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

TYPES = ["uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "uint8", "int4", "int8",
         "float8_e4m3", "float6_e3m2", "float4_e2m1"]
BITS = {t: int("".join(c for c in t.split("_")[0] if c.isdigit())) for t in TYPES}
MS = [1, 16, 128, 4096]
SHAPES = [(28672, 8192), (8192, 8192), (57344, 8192), (8192, 28672), (1024, 8192)]  # (N, K)
QUICK_TYPES = ["uint4", "int4", "float4_e2m1", "uint8", "uint2", "uint1"]
WIDE_SHAPE = (8192, 8192)  # the one shape on which the default runs M > 16
ACTS = {"f16": torch.float16, "bf16": torch.bfloat16}
GROUP, TOL, ROUNDS = 128, 1e-2, 3
# issue 13's decode targets (x cuBLAS at M=1 and 16, N=28672 K=8192), by bit width
TARGETS = {1: 6.5, 2: 5.5, 3: 4.5, 4: 3.5, 6: 2.4, 8: 1.8}
PREFILL_TARGET = 0.85
DEVICE = "cuda"  # the CPU tests set "cpu" (with a stand-in Timer) to dry-run the sweep


# ---------------------------------------------------------------- checking (CPU-testable)

def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf when out has a NaN or inf."""
    out, ref = out.double(), ref.double()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    return ((out - ref).norm() / ref.norm()).item()


def check(out: Any, ref: torch.Tensor, dtype: torch.dtype) -> tuple[float, str]:
    """(rel err, "" when out passes, else why it fails)."""
    if not isinstance(out, torch.Tensor):
        return math.inf, f"returned {type(out).__name__}"
    if tuple(out.shape) != tuple(ref.shape) or out.dtype != dtype:
        return math.inf, (f"shape/dtype {tuple(out.shape)} {out.dtype}, "
                          f"want {tuple(ref.shape)} {dtype}")
    err = rel_err(out, ref)
    return err, "" if err < TOL else ("NaN/inf in the output" if math.isinf(err) else
                                      f"rel err {err:.1e} >= {TOL:g}")


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x @ w.T in float64 (w the float weight the implementation computes with)."""
    return x.double() @ w.double().T


def poisoned_call(fn: Callable[[], torch.Tensor], shape: tuple, dtype: torch.dtype,
                  device: Any) -> torch.Tensor:
    """fn() right after a NaN tensor of its output's shape was freed: the caching allocator
    most likely hands that block to fn's output, so elements fn does not write read NaN."""
    poison = torch.full(shape, math.nan, dtype=dtype, device=device)
    del poison
    return fn()


# ------------------------------------------- torch's int4 peer (layout from torch's int4mm.cu)

def int4_codes(w: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, ...]:
    """Asymmetric 4-bit codes of w (N, K) per group along K, as torch's tests make them:
    q in [0, 15] (N, K) uint8, and bf16 scale, zero (N, K/group) with value = (q - 8) * scale
    + zero (what the kernel computes, in bf16 fma); also that value (N, K) in float32."""
    N, K = w.shape
    g = w.float().reshape(N, K // group, group)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = (hi - lo).clamp(min=1e-6) / 15
    q = ((g - lo) / scale).round().clamp(0, 15)
    scale_b, zero_b = scale.to(torch.bfloat16), (lo + 8 * scale).to(torch.bfloat16)
    value = ((q - 8) * scale_b.float() + zero_b.float()).reshape(N, K)
    return (q.to(torch.uint8).reshape(N, K), scale_b.squeeze(-1), zero_b.squeeze(-1), value)


def int4_operands(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> tuple:
    """The inputs of `_convert_weight_to_int4pack` (uint8 (N, K/2), element 2j in the high
    nibble of byte j) and `_weight_int4pack_mm`'s qScaleAndZeros (bf16 (K/group, N, 2))."""
    nibbles = (q[:, ::2] << 4 | q[:, 1::2]).contiguous()
    return nibbles, torch.stack([scale, zero], -1).transpose(0, 1).contiguous()


def torch_int4_peer(w: torch.Tensor, inner_k_tiles: int = 8) -> tuple[Any, Any, int, str]:
    """(fn(x) -> y, its weight in float32, its weight bytes, "") for torch's tinygemm int4
    kernel on the bf16 weight w (N, K), or (None, None, 0, why not)."""
    aten = torch.ops.aten
    if not (hasattr(aten, "_weight_int4pack_mm") and hasattr(aten, "_convert_weight_to_int4pack")):
        return None, None, 0, "this torch has no _weight_int4pack_mm"
    try:
        q, scale, zero, value = int4_codes(w)
        nibbles, sz = int4_operands(q, scale, zero)
        packed = aten._convert_weight_to_int4pack(nibbles, inner_k_tiles)  # int32 4-d
    except Exception as e:  # noqa: BLE001 - an op a build lacks is reported, not fatal
        return None, None, 0, f"{type(e).__name__}: {str(e)[:80]}"
    nbytes = packed.numel() * packed.element_size() + sz.numel() * sz.element_size()
    return (lambda x: aten._weight_int4pack_mm(x, packed, GROUP, sz)), value, nbytes, ""


# --------------------------------------------------------------------------------- timing

class Timer:
    """Median microseconds of a call, L2 flushed (or not) and the host's launch time hidden."""

    def __init__(self, flush: bool) -> None:
        self.flush = torch.ones(128 << 20, dtype=torch.float16, device="cuda") if flush else None
        for _ in range(200):  # ~0.2 s of spinning first: clocks up before calibrating
            torch.cuda._sleep(1 << 20)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(1 << 20)
        e.record()
        torch.cuda.synchronize()
        self.cycles_per_us = (1 << 20) / (s.elapsed_time(e) * 1e3)
        self.peak = math.nan  # copy GB/s, set by main

    def host_us(self, fn: Callable[[], Any], n: int = 30) -> float:
        """Host time to enqueue one call (no synchronisation inside), after 3 warm calls."""
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        t = (time.perf_counter() - t) / n * 1e6
        torch.cuda.synchronize()
        return t

    def us(self, fn: Callable[[], Any], reps: int, host_us: float) -> float:
        spin = int(self.cycles_per_us * max(50.0, 2 * host_us))
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
        for s, e in events:
            if self.flush is not None:  # read (clean lines: nothing to write back later)
                self.flush.sum()
            torch.cuda._sleep(spin)
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events) * 1e3


def copy_gbps() -> float:
    src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    timer = Timer(flush=False)
    for _ in range(3):
        dst.copy_(src)
    us = timer.us(lambda: dst.copy_(src), 20, timer.host_us(lambda: dst.copy_(src)))
    return 2 * src.numel() * 4 / us / 1e3


# ------------------------------------------------------------------------------- the sweep

@dataclass
class Row:
    wtype: str
    act: str
    M: int
    N: int
    K: int
    err: dict = field(default_factory=dict)  # impl -> rel err
    us: dict = field(default_factory=dict)  # impl -> median us
    spread: dict = field(default_factory=dict)  # impl -> (max - min) / median of the rounds
    nbytes: dict = field(default_factory=dict)  # impl -> weight bytes
    note: str = ""
    fail: str = ""
    t_s: float = math.nan  # seconds since the sweep started, when the row was done


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--full", action="store_true")
    p.add_argument("--types", help="comma list of " + ",".join(TYPES))
    p.add_argument("--m", help="comma list of M")
    p.add_argument("--shapes", help="comma list of NxK")
    p.add_argument("--act", help="f16,bf16 for every type (default f16, and bf16 for uint4)")
    p.add_argument("--no-flush", action="store_true")
    p.add_argument("--minutes", type=float)
    p.add_argument("--csv")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> list[tuple[tuple[int, int], str, str, list[int]]]:
    """[((N, K), type, act, [M...])] in run order: one quantized weight per entry."""
    types = args.types.split(",") if args.types else QUICK_TYPES if args.quick else TYPES
    bad = [t for t in types if t not in TYPES]
    if bad:
        raise SystemExit(f"unknown --types {bad}; known: {','.join(TYPES)}")
    if args.act and not set(args.act.split(",")) <= set(ACTS):
        raise SystemExit(f"--act takes {','.join(ACTS)}, got {args.act}")
    ms = [int(m) for m in args.m.split(",")] if args.m else [1, 16] if args.quick else MS
    shapes = ([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
              if args.shapes else [(28672, 8192)] if args.quick else SHAPES)
    out = []
    for shape in shapes:
        for t in types:
            acts = args.act.split(",") if args.act else ["f16"] + (["bf16"] if t == "uint4" else [])
            for act in acts:
                keep = [m for m in ms if args.full or args.m or m <= 16 or shape == WIDE_SHAPE]
                if keep:
                    out.append((shape, t, act, keep))
    return out


def measure(row: Row, impls: dict, x: torch.Tensor, timer: Timer) -> None:
    """Time every implementation in `impls` (name -> fn(x)) in ROUNDS alternating rounds."""
    hosts, reps = {}, {}
    calls = {name: (lambda fn=fn: fn(x)) for name, fn in impls.items()}
    for name, call in calls.items():
        for _ in range(3):
            call()
        hosts[name] = timer.host_us(call, 3)
        est = timer.us(call, 3, hosts[name])
        reps[name] = max(5, min(50, int(40e3 / max(est, 1.0))))
    rounds: dict[str, list[float]] = {name: [] for name in impls}
    for _ in range(ROUNDS):
        for name, call in calls.items():
            rounds[name].append(timer.us(call, reps[name], hosts[name]))
    for name, ts in rounds.items():
        row.us[name] = statistics.median(ts)
        row.spread[name] = (max(ts) - min(ts)) / row.us[name]


def build_impls(w: torch.Tensor, wtype: str, quant: Any) -> tuple[dict, dict, str]:
    """Our quantized weight of w (N, K) and the peers on it: ({name: (fn(x), the float weight
    fn computes with)}, {name: weight bytes}, note). Scales in w's dtype (= the activations')."""
    N, K = w.shape
    kw = {}
    if "scale_dtype" in inspect.signature(quant.quantize).parameters:
        kw["scale_dtype"] = str(w.dtype).replace("torch.", "")
    qw = quant.quantize(w, wtype, group_size=GROUP, **kw)
    w_ours = qw.dequantize()
    w_peer = w_ours.to(w.dtype)
    impls = {"ours": ((lambda x: quant.matmul(x, qw)), w_ours),
             "cublas": ((lambda x: x @ w_peer.T), w_peer)}
    nbytes = {"ours": sum(t.numel() * t.element_size() for t in (qw.packed, qw.scales, qw.zeros)
                          if t is not None), "cublas": N * K * w.element_size()}
    note = ""
    if wtype == "uint4" and w.dtype == torch.bfloat16 and w.is_cuda:
        fn, w_int4, nbytes["int4"], why = torch_int4_peer(w)
        if fn is None:
            note = f"torch int4 n/a: {why}"
        else:
            impls["int4"] = (fn, w_int4)
    return impls, nbytes, note


def context_dead() -> bool:
    """True when the CUDA context no longer works (a sticky error such as an illegal address)."""
    try:
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any failure here means the same
        return True


def check_impls(impls: dict, M: int, K: int, N: int, dt: torch.dtype, device: Any) -> tuple:
    """Each implementation (name -> (fn, weight)) on two fresh inputs: ({name: max rel err},
    {name: why it failed}, the second input (the one the timing uses))."""
    errs: dict[str, float] = {}
    fails: dict[str, str] = {}
    for _ in range(2):
        x = torch.randn(M, K, device=device).to(dt)
        for name, (fn, wref) in impls.items():
            if name in fails:
                continue
            ref = reference(x, wref)
            try:
                y = poisoned_call(lambda fn=fn, x=x: fn(x), (M, N), dt, x.device)
                if x.is_cuda:
                    torch.cuda.synchronize()  # an asynchronous launch error surfaces here
                err, bad = check(y, ref, dt)
            except Exception as e:  # reported as this implementation's failure
                if x.is_cuda and context_dead():
                    raise  # main stops the sweep
                err, bad = math.inf, f"{type(e).__name__}: {str(e)[:160]}"
            errs[name] = max(errs.get(name, 0.0), err)
            if bad:
                fails[name] = bad
            del ref
    return errs, fails, x


def run_weight(shape: tuple[int, int], wtype: str, act: str, ms: list[int], timer: Timer,
               quant: Any, out: list) -> None:
    """Quantize one weight; check and time every M on it; append a Row per M to out."""
    N, K = shape
    dt = ACTS[act]
    impls, nbytes, note = build_impls(torch.randn(N, K, device=DEVICE).to(dt), wtype, quant)
    for M in ms:
        row = Row(wtype, act, M, N, K, nbytes=dict(nbytes), note=note)
        out.append(row)
        row.err, fails, x = check_impls(impls, M, K, N, dt, DEVICE)
        for name, why in fails.items():
            print(f"!!!! FAIL {name} {wtype} {act} M={M} {N}x{K}: {why}", flush=True)
        if "ours" in fails:
            row.fail = f"ours: {fails['ours']}"
        else:
            row.note += "".join(f" {name} FAIL: {why}" for name, why in fails.items())
            measure(row, {n: fn for n, (fn, _) in impls.items() if n not in fails}, x, timer)
        print(line(row, timer.peak), flush=True)


HEAD = (f"{'type':12s} {'act':4s} {'M':>5s} {'N':>6s} {'K':>6s} {'ours us':>9s} {'GB/s':>6s}"
        f" {'%copy':>5s} {'cuBLAS us':>9s} {'ratio':>6s} {'int4 us':>8s} {'ratio':>6s}"
        f" {'max err':>8s}")


def ratio(row: Row, peer: str) -> float | None:
    """peer us / ours us, None where either was not timed."""
    us = row.us
    return us[peer] / us["ours"] if peer in us and "ours" in us else None


def cell(v: float | None, spec: str, width: int) -> str:
    return f"{'n/a':>{width}s}" if v is None else f"{v:{width}{spec}}"


def line(row: Row, peak: float) -> str:
    start = f"{row.wtype:12s} {row.act:4s} {row.M:5d} {row.N:6d} {row.K:6d}"
    if row.fail:
        return f"{start} {'FAIL':>9s}  {row.fail[:90]}"
    us = row.us
    gbps = row.nbytes["ours"] / us["ours"] / 1e3
    return (f"{start} {us['ours']:9.1f} {gbps:6.0f} {100 * gbps / peak:4.0f}%"
            f" {cell(us.get('cublas'), '.1f', 9)} {cell(ratio(row, 'cublas'), '.2f', 6)}"
            f" {cell(us.get('int4'), '.1f', 8)} {cell(ratio(row, 'int4'), '.2f', 6)}"
            f" {max(row.err.values()):8.1e}" + (f"  {row.note}" if row.note else ""))


def summary(rows: list[Row]) -> None:
    """Per (type, act): x cuBLAS at decode on the headline shape against issue 13's targets,
    the worst 8192x8192 decode and M=4096 ratios, x torch-int4 at decode, failed rows."""
    print("\nsummary: x cuBLAS = cuBLAS us / ours us (int4: torch int4 us / ours us), "
          "targets of issue 13")
    print(f"{'type':12s} {'act':4s} {'M1 28672':>9s} {'M16 28672':>9s} {'target':>6s}"
          f" {'8192^2 M<=16':>12s} {'M4096':>6s} {'x int4':>6s} {'fails':>5s}  verdict")
    for key in dict.fromkeys((r.wtype, r.act) for r in rows):
        mine = [r for r in rows if (r.wtype, r.act) == key]
        fails = sum(1 for r in mine if r.fail or "ours" not in r.us)
        cub = {(r.M, r.N, r.K): ratio(r, "cublas") for r in mine if ratio(r, "cublas")}
        dec = [cub.get((m, 28672, 8192)) for m in (1, 16)]
        sq = [v for (m, n, k), v in cub.items() if m <= 16 and (n, k) == (8192, 8192)]
        pre = [v for (m, n, k), v in cub.items() if m == 4096]
        i4 = [ratio(r, "int4") for r in mine if r.M <= 16 and ratio(r, "int4")]
        bits, target = BITS[key[0]], TARGETS.get(BITS[key[0]])
        miss = [f"{v:.2f}<{target}" for v in dec if v is not None and target and v < target]
        miss += [f"M4096 {min(pre):.2f}<{PREFILL_TARGET}"] if pre and min(pre) < PREFILL_TARGET \
            else []
        miss += [f"8192^2 {min(sq):.2f}<3.0"] if bits == 4 and sq and min(sq) < 3.0 else []
        miss += [f"x int4 {min(i4):.2f}<1"] if i4 and min(i4) < 1 else []
        measured = any(v is not None for v in dec) or sq or pre or i4
        verdict = (f"FAIL ({fails} rows)" if fails else ("miss " + ", ".join(miss)) if miss
                   else "ok" if measured else "- (no target row run)")
        print(f"{key[0]:12s} {key[1]:4s} {cell(dec[0], '.2f', 9)} {cell(dec[1], '.2f', 9)}"
              f" {target or '-':>6} {cell(min(sq) if sq else None, '.2f', 12)}"
              f" {cell(min(pre) if pre else None, '.2f', 6)}"
              f" {cell(min(i4) if i4 else None, '.2f', 6)} {fails:5d}  {verdict}")


def write_csv(rows: list[Row], path: str) -> None:
    names = ["ours", "cublas", "int4"]
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["type", "act", "M", "N", "K", "t_s", "fail", "note"]
                    + [f"{n}_{c}" for n in names for c in ("us", "spread", "err", "bytes")])
        for r in rows:
            wr.writerow([r.wtype, r.act, r.M, r.N, r.K, f"{r.t_s:.1f}", r.fail, r.note]
                        + [v for n in names for v in (r.us.get(n), r.spread.get(n),
                                                      r.err.get(n), r.nbytes.get(n))])


def header(timer: Timer, args: argparse.Namespace) -> None:
    props = torch.cuda.get_device_properties(0)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False,
                                capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "?"
    print(f"GPU {props.name}, {props.multi_processor_count} SMs, L2 "
          f"{getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB; torch {torch.__version__} "
          f"(CUDA {torch.version.cuda}), python {platform.python_version()}, tilecraft {commit}")
    print(f"copy {timer.peak:.0f} GB/s (read + write); L2 "
          f"{'NOT flushed' if args.no_flush else 'flushed (256 MiB read)'} before each call; "
          f"{ROUNDS} alternating rounds; check: rel err < {TOL:g} vs float64, 2 fresh inputs")


def load_quant() -> Any:
    from tilecraft import quant

    return quant


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    work = plan(args)
    quant = load_quant()
    missing = [n for n in ("quantize", "matmul") if not hasattr(quant, n)]
    if missing:
        raise SystemExit(f"tilecraft.quant has no {', '.join(missing)} yet")
    limit = 60 * (args.minutes or (9.5 if args.full else 4.5))
    timer = Timer(flush=not args.no_flush)
    timer.peak = copy_gbps()
    header(timer, args)
    print(f"{len(work)} weights, {sum(len(w[3]) for w in work)} rows; stop starting weights after"
          f" {limit / 60:.1f} min\n{HEAD}", flush=True)
    rows: list[Row] = []
    t0, skipped = time.perf_counter(), []
    for i, (shape, wtype, act, ms) in enumerate(work):
        if time.perf_counter() - t0 > limit:
            skipped = work[i:]
            break
        try:
            run_weight(shape, wtype, act, ms, timer, quant, rows)
        except Exception as e:  # noqa: BLE001 - a dead CUDA context ends the sweep
            print(f"!!!! FAIL {wtype} {act} {shape}: {type(e).__name__}: {str(e)[:300]}")
            if context_dead():
                print("!!!! the CUDA context is unusable: sweep stopped")
                skipped = work[i + 1:]
                break
            why = f"{type(e).__name__}: {str(e)[:80]}"
            mine = [r for r in rows if (r.wtype, r.act, r.N, r.K) == (wtype, act, *shape)]
            for r in mine:
                r.fail = r.fail or ("" if r.us else why)  # the row it died in
            rows += [Row(wtype, act, m, *shape, fail=why) for m in ms[len(mine):]]
        for r in rows:
            r.t_s = time.perf_counter() - t0 if math.isnan(r.t_s) else r.t_s
        torch.cuda.empty_cache()
    print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.0f} s")
    if skipped:
        print(f"not run ({len(skipped)} weights, time guard or stop): "
              + " ".join(f"{t}/{a}/{n}x{k}" for (n, k), t, a, _ in skipped))
    summary(rows)
    path = args.csv or (os.path.join(os.environ["OUT"], "quant_gemm.csv")
                        if os.environ.get("OUT") else None)
    if path:
        write_csv(rows, path)
        print(f"csv: {path}")


if __name__ == "__main__":
    sys.exit(main())

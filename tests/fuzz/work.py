"""Running one program: front end, interpreter vs model, NVRTC for sm_90a and sm_80, the GPU.

`check(prog, mode, workdir)` returns an Outcome: its status is the worst of what happened —
internal (an exception that is not a TilecraftError: a bug, wherever it came from; an NVRTC
error on generated code counts as one), mismatch (a result outside the model's bounds, or GPU
and interpreter disagreeing), spill (ptxas spilled registers), refused (a TilecraftError: a
located refusal, counted by code), pass.
"""

from __future__ import annotations

import re
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import check as C
from . import dtypes as D

ARCHS = ("sm_90a", "sm_80")
RANK = {"internal": 5, "hang": 4, "mismatch": 3, "spill": 2, "refused": 1, "pass": 0}


@dataclass
class Outcome:
    seed: int
    status: str = "pass"
    events: list = field(default_factory=list)  # (status, stage, key, detail)

    def add(self, status: str, stage: str, key: str, detail: str) -> None:
        self.events.append((status, stage, key, detail))
        if RANK[status] > RANK[self.status]:
            self.status = status

    def signature(self) -> str:
        """What kind of failure this is (for de-duplication and shrinking)."""
        worst = [e for e in self.events if e[0] == self.status]
        return f"{self.status}:{worst[0][1]}:{worst[0][2]}" if worst else "pass"

    def refusals(self) -> list[str]:
        return [f"{stage}:{key}" for s, stage, key, _ in self.events if s == "refused"]


def _exc_key(e: BaseException) -> str:
    """A short description that is the same for the same defect in different programs."""
    code = getattr(e, "code", None)
    if code:
        return code
    text = str(e)
    errors = [ln for ln in text.splitlines() if ": error" in ln]
    msg = errors[0] if errors else (text.splitlines()[0] if text else "")
    msg = re.sub(r"\S*/", "", msg)  # no directories
    msg = re.sub(r"\b(fuzz_\d+|\d+)\b", "N", msg)[:100]
    return f"{type(e).__name__}: {msg}"


def _internal(out: Outcome, stage: str, e: BaseException) -> None:
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
    out.add("internal", stage, _exc_key(e), tb)


def _guard(out: Outcome, stage: str, fn):
    """Run fn(); a TilecraftError is a refusal, anything else internal. Returns (ok, value)."""
    from tilecraft.diagnostics import TilecraftError

    try:
        return True, fn()
    except TilecraftError as e:
        out.add("refused", stage, e.code, str(e).splitlines()[0][:200])
    except Exception as e:  # noqa: BLE001 - every other exception is a finding
        _internal(out, stage, e)
    return False, None


def _args(prog, inputs: dict) -> list:
    return [inputs[p.name] if p.is_scalar else np.array(inputs[p.name], copy=True)
            for p in prog.params()]


def _outputs(prog, args: list) -> dict:
    return {p.name: np.asarray(a) for p, a in zip(prog.params(), args) if not p.is_scalar}


def check(prog, mode: str, workdir: Path, source: str | None = None) -> Outcome:
    out = Outcome(prog.seed)
    path = workdir / f"fuzz_{prog.seed}.py"
    from .gen import load

    ok, make = _guard(out, "front end", lambda: load(source or prog.source, path))
    if not ok:
        return out
    ok, func = _guard(out, "front end", make)
    if not ok:
        return out
    inputs = prog.inputs()
    expected = prog.expected(inputs)
    args = _args(prog, inputs)
    from tilecraft import interp

    # (Tilus-level instructions: the tile interpreter refuses them; their interpreter is the
    # block VM, on the kernel lowered as for the GPU)
    tilus = any(getattr(s, "tilus", False) for s in prog.segments)
    ran, _ = _guard(out, "interpreter",
                    (lambda: _on_vm(func, args)) if tilus else (lambda: interp.run(func, args)))
    interp_out = _outputs(prog, args) if ran else None
    if ran:
        for line in C.against_model(expected, interp_out):
            out.add("mismatch", "interpreter", "model", line)
        if not tilus:
            _lowered(out, prog, func, inputs, interp_out)
    if mode in ("compile", "gpu"):
        for arch in ARCHS:
            _compile(out, func, arch)
    if mode == "gpu" and ran:
        _gpu(out, prog, func, inputs, interp_out, expected)
    return out


def _on_vm(func, args: list) -> None:
    """Run `func` lowered to block instructions on the block VM, shared tensors in the arena
    (what runs a kernel with Tilus-level instructions on the CPU)."""
    from tilecraft.block.vm import run
    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program
    from tilecraft.targets import H100_SXM

    run(lowered_program(lower(func, H100_SXM)), args, arena=True)


def _lowered(out: Outcome, prog, func, inputs: dict, interp_out: dict) -> None:
    """The kernel lowered to block instructions (lower_tile_ops), run on the block VM with the
    shared-memory plan's arena, must give the interpreter's bits. Not lowered (TC502):
    skipped; another error of the lowered program (a thread touching a register element it
    does not hold, TC610; replicas that differ, TC607; ...) is a mismatch: the layouts or the
    arena the CUDA printer relies on are wrong."""
    from tilecraft.diagnostics import TilecraftError
    from tilecraft.options import CompileOptions
    from tilecraft.passes import lower
    from tilecraft.passes.lower_tile_ops import lowered_program

    try:  # (the switches of the environment: TILECRAFT_WS=always fuzzes every split)
        state = lower(func, CompileOptions.from_env("sm_90a"))
    except TilecraftError:
        return  # refused by the compiler (its codegen stages count it)
    try:
        from tilecraft.block.vm import run

        program = lowered_program(state)
        args = _args(prog, inputs)
        run(program, args, arena=True)  # shared tensors where the GPU keeps them
    except TilecraftError as e:
        if e.code != "TC502":
            out.add("mismatch", "lowered", e.code, str(e).splitlines()[0])
        return
    except Exception as e:  # noqa: BLE001 (a bug of the lowering or the VM)
        _internal(out, "lowered", e)
        return
    lowered = _outputs(prog, args)
    for name, want in interp_out.items():
        bad = _bit_differences(lowered[name], np.asarray(want))
        if bad:
            out.add("mismatch", "lowered", "interp", f"{name}: the block VM differs from the "
                    f"interpreter at {bad} elements")


def _bit_differences(a: np.ndarray, b: np.ndarray) -> int:
    """Elements whose bits differ, NaNs equal whatever their payload or sign (the language
    does not define those bits)."""
    if a.dtype.itemsize not in (1, 2, 4, 8):
        return int((a != b).sum())
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    differ = a.view(u) != b.view(u)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        differ &= ~(np.isnan(fa) & np.isnan(fb))
    return int(differ.sum())


def _compile(out: Outcome, func, arch: str) -> None:
    from tilecraft.codegen.cuda.build import compile_generated, generate_cuda

    ok, gen = _guard(out, f"codegen {arch}", lambda: generate_cuda(func, arch))
    if not ok:
        return
    ok, built = _guard(out, f"nvrtc {arch}", lambda: compile_generated(gen, arch))
    if ok:
        res = built[0].resources
        if res.spill_stores or res.spill_loads:
            out.add("spill", f"ptxas {arch}", "spill", f"{res.spill_stores} spill stores, "
                    f"{res.spill_loads} spill loads, {res.registers} registers")
    elif out.events and out.events[-1][0] == "refused":  # NVRTC rejecting generated code
        s, stage, key, detail = out.events.pop()
        out.status = max((e[0] for e in out.events), key=RANK.get, default="pass")
        out.add("internal", stage, key, detail)


def _to_torch(a, device: str):
    import torch

    if isinstance(a, np.ndarray):
        if a.dtype == D.ALL["bfloat16"].np:
            return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16).to(device)
        return torch.from_numpy(a.copy()).to(device)
    return a


def _from_torch(t) -> np.ndarray:
    import torch

    if t.dtype == torch.bfloat16:
        return t.cpu().view(torch.uint16).numpy().view(D.ALL["bfloat16"].np)
    return t.cpu().numpy()


def _gpu(out: Outcome, prog, func, inputs: dict, interp_out: dict, expected: dict,
         target: str = "cuda", device: str = "cuda") -> None:
    """Run on the GPU with the interpreter's inputs (torch tensors); compare with the
    interpreter and with the model. (`target="interp", device="cpu"` tests the plumbing.)"""
    import torch

    import tilecraft

    def launch():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel = tilecraft.compile(func, target=target)
            targs = [_to_torch(inputs[p.name], device) for p in prog.params()]
            kernel(*targs)
            if device == "cuda":
                torch.cuda.synchronize()
        return {p.name: _from_torch(a) for p, a in zip(prog.params(), targs) if not p.is_scalar}

    ok, gpu_out = _guard(out, "gpu", launch)
    if not ok:
        return
    for line in C.between_runs(gpu_out, interp_out, expected):
        out.add("mismatch", "gpu", "interp", line)
    for line in C.against_model(expected, gpu_out):
        out.add("mismatch", "gpu", "model", line)

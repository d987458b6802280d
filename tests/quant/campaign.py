"""A differential campaign for tilecraft.quant.matmul: each seed draws a weight type, scheme,
group size, scale dtype, shape, token count, activation dtype, leading dims, bias and a weight
(normal, lopsided rows, outliers, zeroed groups), sometimes with its zeros or scales then set by
hand as a checkpoint made elsewhere may hold them (a zero common to every group, whole or not;
fractional zeros; negated scales). The call's every element is checked against float64 from
`QuantizedWeight.dequantize()`:

    |y - ref| <= 8 (eps sqrt(x^2 @ (W^2 + Z^2)^T) + sub sqrt(sum x^2)) + 2 eps |ref| + tiny

with eps the activation type's unit roundoff (2^-11 for f16, 2^-8 for bf16), Z the zeros'
part of an asymmetric weight (zero times scale over its group; none for a zero point), sub
half the step of f16's subnormals (2^-25; bf16: 2^-134) and tiny the step itself (an output
that small rounds to it). The kernels may round each dequantized weight, or q s and z s apart,
and each f32 sum, once: errors of at most eps |x w| each, of either sign and independent of
one another, whose sum grows as the root of the sum of squares; 8 times that root leaves a
correct kernel far inside (a worst case that adds every error with one sign would take
sqrt(K) times more, and would hide a wrong group in a long row). A wrong scale, zero, group or
slice, or a missing one, moves an output by its whole contribution (1.5 times one group's
scale in one row: caught at K = 4096 in bf16, test_campaign.py).

The shapes reach choose_config's thresholds (N's 128-channel tiles against the SMs and twice
the SMs, splits, the last block, step_scales, prefill), so every plan the library picks for
some user gets checked. Outcomes: pass, refused (a TilecraftError: the message is printed;
every draw is a valid call, so the exit status counts it as a failure too), mismatch, error
(any other exception).

    python3 -m tests.quant.campaign --seeds 0-199 --device cuda
    python3 -m tests.quant.campaign --seeds 0-19 --device cpu      # the interpreter, small shapes
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
import traceback
from dataclasses import dataclass

import torch

from tests.quant.helpers import TYPES

SMS = 132  # the H100's and H200's SMs: the thresholds choose_config compares N's tiles with


@dataclass
class Case:
    seed: int
    wtype: str
    scheme: str
    group: int | None
    scale_dtype: str
    N: int
    K: int
    M: int
    lead: tuple[int, ...]  # x's leading dims (their product is M)
    act: str
    bias: bool
    weight: str  # normal | lopsided | outliers | zero groups
    edit: str  # none | uniform zero | fractional zeros | negated scales

    def __str__(self) -> str:
        return (f"seed {self.seed}: {self.wtype} {self.scheme} group={self.group} "
                f"scales={self.scale_dtype} N={self.N} K={self.K} M={self.M} x{self.lead} "
                f"{self.act} bias={self.bias} weight={self.weight} edit={self.edit}")


def draw(seed: int, device: str) -> Case:
    """The case of `seed`: small shapes for the interpreter (cpu), the plans' thresholds on a
    GPU."""
    rng = random.Random(seed)
    wtype = rng.choice(TYPES)
    schemes = ["asymmetric"] if wtype == "uint1" else ["symmetric", "asymmetric"]
    scheme = rng.choice(schemes)
    if device == "cpu":  # (K up to 4096 splits it at decode, as on a GPU)
        N = 64 * rng.choice([1, 1, 2, 3, 4])
        K = 64 * rng.choice([1, 2, 2, 3, 4, 6, 16, 64])
        M = rng.choice([1, 1, 2, 3, 5, 8, 9, 16, 17, 33, 100])
    else:
        N = rng.choice([64, 192, 1024, 4096, 8192, 128 * SMS - 64, 128 * SMS, 128 * SMS + 128,
                        256 * SMS, 28672, 57344, 64 * rng.randint(1, 640)])
        K = 64 * rng.choice([1, 2, 4, 8, 16, 32, 64, 96, 128, 3, 5, 7, 36, 448])
        while N * K > (1 << 26):  # (a float32 weight of at most 256 MiB)
            K //= 2
        K = max(64, K // 64 * 64)
        r = rng.random()
        M = (rng.randint(1, 16) if r < 0.6 else rng.randint(17, 300) if r < 0.9
             else rng.choice([512, 1000, 4096]))
        while M * K > (1 << 25) and M > 1:
            M //= 2
    groups = [g for g in (64, 128, 256, 512) if K % g == 0] + [None]
    group = rng.choice(groups)
    lead = (M,)
    if M % 2 == 0 and rng.random() < 0.2:
        lead = (2, M // 2)
    return Case(seed, wtype, scheme, group, rng.choice(["float16", "float16", "bfloat16"]), N, K,
                M, lead, rng.choice(["float16", "bfloat16"]), rng.random() < 0.3,
                rng.choice(["normal", "normal", "lopsided", "outliers", "zero groups"]),
                rng.choice(["none"] * 6 + ["uniform zero", "fractional zeros",
                                           "negated scales"]))


def make_weight(case: Case, gen: torch.Generator) -> torch.Tensor:
    N, K = case.N, case.K
    w = torch.randn(N, K, generator=gen) * 0.05
    if case.weight == "lopsided":  # rows shifted and scaled: one-signed groups
        w = w * torch.rand(N, 1, generator=gen) * 3 + (torch.rand(N, 1, generator=gen) - 0.5) * 0.2
    elif case.weight == "outliers":
        idx = torch.randint(0, N * K, (max(1, N * K // 500),), generator=gen)
        w.view(-1)[idx] *= 40
    elif case.weight == "zero groups":
        g = case.group or K
        mask = torch.rand(N, K // g, generator=gen) < 0.2
        w = w * (~mask).repeat_interleave(g, dim=1)
    return w


def edited(case: Case, qw, gen: torch.Generator):
    """`qw` with its zeros or scales set as a checkpoint from elsewhere may hold them."""
    if case.edit == "none":
        return qw
    if case.edit == "negated scales":
        flip = torch.rand(qw.scales.shape, generator=gen).to(qw.scales.device) < 0.5
        return dataclasses.replace(qw, scales=torch.where(flip, -qw.scales, qw.scales))
    if qw.zeros is None:
        return qw  # (nothing to edit: a symmetric weight keeps its zero point)
    if case.edit == "uniform zero":
        from tilecraft.dtypes import resolve

        top = float((1 << resolve(qw.dtype).bits) - 1)
        v = random.Random(case.seed).choice([0.0, 1.0, top, top / 2, 0.5])
        return dataclasses.replace(qw, zeros=torch.full_like(qw.zeros, v))
    noise = torch.rand(qw.zeros.shape, generator=gen).to(qw.zeros.device) - 0.5
    return dataclasses.replace(qw, zeros=(qw.zeros.float() + noise).to(qw.zeros.dtype))


def offsets(qw) -> torch.Tensor:
    """|zero x scale| of each element's group, (N, K) float64, for a weight with zeros (the
    part the kernels may round apart from q s); zeros for a zero point (subtracted from the
    codes exactly, never rounded on its own)."""
    N, K = qw.shape
    if qw.zeros is None:
        return torch.zeros(N, K, dtype=torch.float64, device=qw.scales.device)
    z = (qw.zeros.double() * qw.scales.double()).abs()
    return z.repeat_interleave(qw.group_size, dim=1).reshape(N, K)


def run(case: Case, device: str) -> tuple[str, str]:
    import tilecraft
    import tilecraft.quant as quant

    gen = torch.Generator().manual_seed(case.seed)
    w = make_weight(case, gen).to(device)
    try:
        qw = quant.quantize(w, case.wtype, group_size=case.group, scheme=case.scheme,
                            scale_dtype=case.scale_dtype)
        qw = edited(case, qw, gen)
        act = getattr(torch, case.act)
        x = torch.randn(*case.lead, case.K, generator=gen).to(device=device, dtype=act)
        bias = torch.randn(case.N, generator=gen).to(device) if case.bias else None
        y = quant.matmul(x, qw, bias)
    except tilecraft.TilecraftError as err:
        return "refused", str(err).splitlines()[0]
    except Exception:  # noqa: BLE001 - the campaign reports every other failure
        return "error", traceback.format_exc(limit=4)
    return check(y, x, qw, bias)


def check(y: torch.Tensor, x: torch.Tensor, qw, bias: torch.Tensor | None) -> tuple[str, str]:
    """("pass" | "mismatch", detail) of `y` = quant.matmul(x, qw, bias): its dtype, shape and
    every element against float64 within the module docstring's bound."""
    N, K = qw.shape
    D = qw.dequantize().double().to(x.device)
    x64 = x.double().reshape(-1, K)
    ref = x64 @ D.T
    var = (x64 * x64) @ (D * D + offsets(qw).to(x.device) ** 2).T
    if bias is not None:
        ref = ref + bias.double()
        var = var + bias.double() ** 2
    if y.dtype != x.dtype or tuple(y.shape) != (*x.shape[:-1], N):
        return "mismatch", f"y is {y.dtype} {tuple(y.shape)}"
    f16 = x.dtype == torch.float16
    eps, sub, tiny = (2.0 ** -11, 2.0 ** -25, 2.0 ** -24) if f16 else \
        (2.0 ** -8, 2.0 ** -134, 2.0 ** -133)
    y64 = y.double().reshape(-1, N)
    spread = eps * var.sqrt() + sub * (x64 * x64).sum(1, keepdim=True).sqrt()
    bound = 8 * spread + 2 * eps * ref.abs() + tiny
    over = (y64 - ref).abs() / bound
    over = torch.where(torch.isfinite(y64), over, torch.full_like(over, float("inf")))
    worst = over.max().item()
    if not worst <= 1.0:
        m, n = divmod(int(over.argmax().item()), N)
        bad = int((over > 1).sum().item())
        return "mismatch", (f"{bad} of {over.numel()} elements over the bound; worst (m={m}, "
                            f"n={n}): y={y64[m, n].item():.6g} ref={ref[m, n].item():.6g} "
                            f"bound={bound[m, n].item():.3g}")
    return "pass", f"worst {worst:.3f} of the bound"


def seeds(text: str) -> range:
    a, _, b = text.partition("-")
    return range(int(a), int(b or a) + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-49")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--minutes", type=float, default=8.0, help="start no case after this")
    ap.add_argument("-v", action="store_true", help="print passing cases too")
    a = ap.parse_args(argv)
    counts: dict[str, int] = {}
    t0 = time.time()
    for seed in seeds(a.seeds):
        if time.time() - t0 > a.minutes * 60:
            print(f"time: stopped before seed {seed}")
            break
        case = draw(seed, a.device)
        status, detail = run(case, a.device)
        counts[status] = counts.get(status, 0) + 1
        if status != "pass" or a.v:
            print(f"{status.upper()}: {case}\n    {detail}", flush=True)
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())), f"({time.time() - t0:.0f} s)")
    # (every draw is a valid call: a refusal is a gap in what the library takes, counted too)
    return 1 if counts.get("mismatch") or counts.get("error") or counts.get("refused") else 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared helpers of the quantization tests: the weight types, random weights, and the check
that an error is TC321 at the test's own line (marked `# ERR`)."""

from __future__ import annotations

import pytest
import torch

import tilecraft

UINTS = [f"uint{b}" for b in range(1, 9)]
INTS = [f"int{b}" for b in range(2, 9)]
FLOATS = ["float8_e4m3", "float8_e5m2", "float6_e3m2", "float6_e2m3", "float5_e2m2",
          "float4_e2m1", "float3_e1m1", "float2_e1m0"]
TYPES = UINTS + INTS + FLOATS
# (type, scheme) pairs: every type under both schemes, but symmetric uint1 (refused)
TYPE_SCHEMES = [(t, s) for t in TYPES for s in ("symmetric", "asymmetric")
                if (t, s) != ("uint1", "symmetric")]


def weight(N: int, K: int, seed: int = 0, device: str = "cpu") -> torch.Tensor:
    """A float32 (N, K) weight: normal values with some rows shifted and scaled, so groups
    differ (one-signed groups included)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(N, K, generator=gen)
    w = w * torch.rand(N, 1, generator=gen) * 3 + (torch.rand(N, 1, generator=gen) - 0.5) * 4
    return w.to(device)


def error_here(call) -> tilecraft.TilecraftError:
    """Run `call`: it must raise TC321 reported at the calling test's line marked `# ERR`."""
    with pytest.raises(tilecraft.TilecraftError) as info:
        call()
    err = info.value
    assert err.code == "TC321", err
    assert err.span is not None and err.file.endswith(".py") and "tests/quant" in err.file, err
    assert "# ERR" in err.span.source_line(), err.span.source_line()
    return err

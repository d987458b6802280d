"""Hardware descriptions and picking the current target."""

import pytest
import torch

from tilecraft.targets import (
    A100_SXM,
    H100_SXM,
    H200,
    arch_for_capability,
    current_target,
    target_from_arch,
)


def test_published_limits():
    assert H100_SXM.max_shared_memory_per_block == 232448
    assert A100_SXM.max_shared_memory_per_block == 166912
    assert H100_SXM.sm_count == 132 and A100_SXM.sm_count == 108
    assert H200.memory_bandwidth > H100_SXM.memory_bandwidth
    assert H100_SXM.sm_version == 90 and A100_SXM.sm_version == 80
    assert H100_SXM.has_wgmma and not A100_SXM.has_wgmma


def test_target_from_arch():
    assert target_from_arch("sm_90a") is H100_SXM
    assert target_from_arch("sm_80") is A100_SXM
    plain = target_from_arch("sm_90")
    assert plain.arch == "sm_90" and not plain.has_wgmma and plain.sm_count == 132
    with pytest.raises(ValueError, match="unknown arch"):
        target_from_arch("sm_999")


def test_arch_for_capability():
    assert arch_for_capability(9, 0) == "sm_90a"
    assert arch_for_capability(8, 0) == "sm_80"
    assert arch_for_capability(8, 6) == "sm_86"


def test_env_overrides_the_live_gpu(monkeypatch):
    monkeypatch.setenv("TILECRAFT_ARCH", "sm_80")
    assert current_target() is A100_SXM


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback without a GPU")
def test_fallback_without_gpu(monkeypatch):
    monkeypatch.delenv("TILECRAFT_ARCH", raising=False)
    assert current_target() is H100_SXM
    with pytest.raises(LookupError):
        current_target(fallback=None)

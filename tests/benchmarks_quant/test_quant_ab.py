"""benchmarks/quant_ab.py on the CPU: each variant spec (type, configuration overrides, the
symmetric scheme) builds a call that matches its dequantized reference on the interpreter,
and a spec the kernel cannot take is an error before anything is timed."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "quant_ab.py"
_spec = importlib.util.spec_from_file_location("quant_ab_bench", _PATH)
ab = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


@pytest.mark.parametrize("spec", ["uint3", "uint3:zero_fma=False", "uint6:sym",
                                  "float6_e3m2:fold_scales=False"])
def test_a_variant_spec_builds_a_checked_call(spec):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(128, 256, generator=g) * 0.02
    x = torch.randn(32, 256, generator=g).half()
    call, err = ab.variant(spec, w, x)
    assert err < 1e-2 and call().shape == (32, 128)


def test_an_unknown_override_is_refused():
    w, x = torch.randn(128, 256) * 0.02, torch.randn(32, 256).half()
    with pytest.raises(Exception, match="no_such_option"):
        ab.variant("uint4:no_such_option=1", w, x)


def test_a_compiler_switch_in_a_spec_is_set_around_each_call_only(monkeypatch):
    import os

    monkeypatch.delenv("TILECRAFT_SINK_STORES", raising=False)
    seen = []

    def spy(name):
        real = getattr(ab.qmm, name)

        def wrapped(*args, **kwargs):
            seen.append((name, os.environ.get("TILECRAFT_SINK_STORES")))
            return real(*args, **kwargs)
        monkeypatch.setattr(ab.qmm, name, wrapped)
    spy("_prepare")
    spy("_launch")
    w, x = torch.randn(128, 256) * 0.02, torch.randn(32, 256).half()
    call, err = ab.variant("uint4:TILECRAFT_SINK_STORES=0", w, x)
    call()
    # (prepared once, the kernels built under the switch; launched under it each call)
    assert err < 1e-2 and seen == [("_prepare", "0"), ("_launch", "0"), ("_launch", "0")]
    assert "TILECRAFT_SINK_STORES" not in os.environ


def test_a_variant_is_prepared_once_as_the_call_cache_would(monkeypatch):
    """(a configuration's call through quant_matmul(config=) prepares every time: with
    step_scales that transposed the scales inside every timed call, session 26)"""
    w, x = torch.randn(128, 256) * 0.02, torch.randn(1, 256).half()
    call, _ = ab.variant("uint4:step_scales=True", w, x)
    prepared = []
    real = ab.qmm._prepare

    def counted(*args, **kwargs):
        prepared.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(ab.qmm, "_prepare", counted)
    call()
    call()
    assert prepared == []

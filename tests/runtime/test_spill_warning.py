"""A kernel that spills registers builds and runs, with a PerformanceWarning at the user's line."""

import sys
import warnings
from pathlib import Path

import pytest

import tilecraft

pytest.importorskip("cuda.bindings.nvrtc")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm  # noqa: E402


def _build(*config, **kwargs):
    factory = tilecraft.jit(out_idx=[-1], arch="sm_90a", cache=False)(gemm.matmul.factory)
    return factory(1024, 1024, 1024, *config, **kwargs)


def test_a_spilling_kernel_warns_at_its_definition():
    # 128x256 fp32 accumulators on one warpgroup: 256 per thread, more than the register file
    with pytest.warns(tilecraft.PerformanceWarning, match="spills registers") as record:
        kernel = _build(128, 256, 64, num_stages=3, threads=128)
    assert kernel.resources.has_spills
    (w,) = [w for w in record if w.category is tilecraft.PerformanceWarning]
    assert Path(w.filename).name == "gemm.py" and "bytes of spill stores" in str(w.message)


def test_a_kernel_without_spills_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error", tilecraft.PerformanceWarning)
        kernel = _build(128, 128, 32, num_stages=3, threads=128)
    assert not kernel.resources.has_spills

"""`tilecraft.jit` / `tilecraft.compile` take exactly the keywords they honour (TileLang's others
only with their no-op values), at the user's line."""

import os

import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError


def marked_line(marker: str) -> int:
    """The line of this file carrying `# <marker>`."""
    with open(__file__) as f:
        hits = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def scale_factory(n=64):
    @T.prim_func
    def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(n):
                B[i] = A[i] * 2.0

    return scale


def test_misspelled_jit_keyword_is_an_error_with_the_closest_name():
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(out_ids=[-1])(scale_factory)  # ERR-jit-kw
    e = info.value
    assert e.code == "TC111"
    assert e.file == __file__ and e.line == marked_line("ERR-jit-kw")
    assert "did you mean `out_idx`?" in str(e)
    assert e.span.col == e.span.source_line().index("out_ids")


def test_misspelled_compile_keyword_is_an_error():
    with pytest.raises(TilecraftError) as info:
        tilecraft.compile(scale_factory(), out_idx=[-1], debug_nan=True)  # ERR-compile-kw
    assert info.value.code == "TC111"
    assert info.value.line == marked_line("ERR-compile-kw")
    assert "did you mean `debug_nans`?" in str(info.value)


@pytest.mark.parametrize("keyword, value, says", [
    ("pass_configs", {"tl.disable_tma_lower": True}, "TILECRAFT_TMA=0"),
    ("execution_backend", "cython", "cuLaunchKernelEx"),
    ("verbose", True, "get_kernel_source"),
    ("compile_flags", ["-O3"], "NVRTC"),
    ("target_host", "llvm", "Python"),
])
def test_tilelang_options_that_would_do_something_are_refused(keyword, value, says):
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(out_idx=[-1], **{keyword: value})
    e = info.value
    assert e.code == "TC113" and e.file == __file__
    assert f"{keyword}=" in str(e) and says in e.hint


def test_tilelang_options_with_their_no_op_values_are_accepted():
    jit = tilecraft.jit(out_idx=[-1], target="interp", pass_configs={}, execution_backend="auto",
                        verbose=False, compile_flags=None, target_host=None)
    kernel = jit(scale_factory)()
    a = torch.randn(64)
    torch.testing.assert_close(kernel(a), a * 2)


def test_unknown_target_is_refused_with_a_hint():
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(target="llvm")  # ERR-target
    assert info.value.code == "TC108" and info.value.line == marked_line("ERR-target")
    assert "target='interp'" in info.value.hint
    with pytest.raises(TilecraftError, match="did you mean 'cuda'"):
        tilecraft.compile(scale_factory(), target="cdua")


def test_out_idx_past_the_parameters_is_an_error_not_a_wrapped_index():
    # out_idx=[2] on a 2-parameter kernel used to wrap around to parameter 0 (A)
    with pytest.raises(TilecraftError) as info:
        tilecraft.compile(scale_factory(), out_idx=[2])
    assert info.value.code == "TC108" and "has 2 parameter(s)" in str(info.value)
    with pytest.raises(TilecraftError) as info:
        tilecraft.jit(out_idx="B")  # ERR-out-idx
    assert info.value.code == "TC108" and info.value.line == marked_line("ERR-out-idx")


def test_debug_nans_is_kept_on_the_kernel():
    kernel = tilecraft.jit(out_idx=[-1], target="interp", debug_nans=True)(scale_factory)()
    assert kernel.debug_nans is True
    assert tilecraft.compile(scale_factory(), out_idx=[-1]).debug_nans is False


def test_debug_root_path_receives_the_program_and_the_cuda_source(tmp_path):
    root = tmp_path / "dump"
    kernel = tilecraft.compile(scale_factory(), out_idx=[-1], arch="sm_80",
                               debug_root_path=str(root))
    assert "def scale" in (root / "tilecraft_jit_program_scale.py").read_text()
    source = kernel.get_kernel_source()  # builds through NVRTC for sm_80, GPU or not
    cu = [f for f in os.listdir(root) if f.endswith(".cu")]
    assert len(cu) == 1 and (root / cu[0]).read_text().strip() == source.strip()


def test_a_factory_returning_something_else_is_a_located_error():
    @tilecraft.jit
    def not_a_factory(n):
        return n

    with pytest.raises(TilecraftError) as info:
        not_a_factory(3)  # ERR-factory
    assert info.value.code == "TC108" and info.value.line == marked_line("ERR-factory")

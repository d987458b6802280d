"""Errors point at the user's file and line, with the source line, a caret and a hint."""

import inspect

import numpy as np
import pytest
import torch

import tilecraft
from tilecraft import TilecraftError

from . import kernels_with_errors as K


def err_line(factory) -> int:
    lines, first = inspect.getsourcelines(factory)
    hits = [first + i for i, ln in enumerate(lines) if "# ERR" in ln]
    assert len(hits) == 1
    return hits[0]


def raise_from(factory) -> TilecraftError:
    with pytest.raises(TilecraftError) as info:
        factory()
    return info.value


@pytest.mark.parametrize("factory, code", [
    (K.unknown_name, "TC101"),
    (K.wrong_bindings, "TC102"),
    (K.out_of_bounds_slice, "TC201"),
    (K.gemm_shape_mismatch, "TC202"),
    (K.gemm_dtype_mismatch, "TC203"),
    (K.copy_shape_mismatch, "TC204"),
    (K.python_try, "TC103"),
    (K.python_list_comprehension, "TC103"),
    (K.rebind_device_value, "TC116"),
    (K.undefined_name, "TC104"),
])
def test_parse_error_names_the_users_file_and_line(factory, code):
    e = raise_from(factory)
    assert e.code == code
    assert e.file == K.__file__
    assert e.line == err_line(factory)
    text = str(e)
    assert f"{K.__file__}:{e.line}" in text
    assert "# ERR" in text  # the source line is shown
    assert "^" in text


def test_unknown_name_suggests_the_close_match():
    e = raise_from(K.unknown_name)
    assert "T.fooo" in e.message
    assert "T.fill" in e.hint or "T.floor" in e.hint


def test_unsupported_construct_says_what_to_use_instead():
    e = raise_from(K.python_try)
    assert "try" in e.message and "if" in e.hint


def test_tile_op_inside_parallel_is_reported_at_run():
    kernel = tilecraft.compile(K.tile_op_in_parallel(), target="interp")
    with pytest.raises(TilecraftError) as info:
        kernel(torch.zeros(128))
    assert info.value.line == err_line(K.tile_op_in_parallel)


@pytest.fixture
def call_kernel():
    return tilecraft.compile(K.call_time_kernel(), target="interp")


def _ab():
    return torch.randn(128, 64).half(), torch.empty(128, 64, dtype=torch.float16)


def test_wrong_argument_count(call_kernel):
    a, _ = _ab()
    with pytest.raises(TilecraftError) as info:
        call_kernel(a)
    assert info.value.code == "TC301"


def test_wrong_shape_names_the_parameter_line(call_kernel):
    _, b = _ab()
    with pytest.raises(TilecraftError) as info:
        call_kernel(torch.randn(64, 64).half(), b)
    e = info.value
    assert e.code == "TC302" and "`A`" in e.message
    assert e.line == err_line(K.call_time_kernel)


def test_wrong_dtype_says_how_to_convert(call_kernel):
    _, b = _ab()
    with pytest.raises(TilecraftError) as info:
        call_kernel(torch.randn(128, 64), b)
    e = info.value
    assert e.code == "TC303" and "float16" in e.message and "torch.float16" in e.hint


def test_nothing_runs_on_bad_input(call_kernel):
    b = torch.full((128, 64), 7.0, dtype=torch.float16)
    with pytest.raises(TilecraftError):
        call_kernel(torch.randn(128, 65).half(), b)
    assert np.all(b.numpy() == 7.0)

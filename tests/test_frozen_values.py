"""tilecraft's small value classes (spans, diagnostics, targets, resources, cubins, the jit-cache
record) behave as the frozen dataclasses they replaced: equal and hashed by value, immutable,
a dataclass-style repr, pickled and copied, `replace`d; and the jit key sees them by value."""

import copy
import dataclasses
import pickle

import pytest

from tilecraft.diagnostics import CATALOG, Span
from tilecraft.jit_key import Fingerprint
from tilecraft.runtime import (
    CompiledCubin,
    LaunchSpec,
    Resources,
    ScalarParam,
    TensorMapParam,
    TensorParam,
)
from tilecraft.runtime.record import GridExpr
from tilecraft.targets import A100_SXM, H100_SXM, H200, Target, target_from_arch

VALUES = [
    Span("k.py", 3, 4, 9),
    CATALOG["TC108"],
    H100_SXM,
    Resources(registers=40, spill_stores=8),
    CompiledCubin("k", "sm_90a", b"\x7fELF", Resources(registers=8), "log", ("-O3",)),
    GridExpr(["//", ["dim", "m"], 128]),
    TensorParam("A", "float16", ("m", 64), None, 16),
    ScalarParam("m", "int32", dim="m"),
    TensorMapParam("A_tmap", "A", (4, 64, 64), 128, split=64),
    LaunchSpec(grid=(2, 3), block=(128,), smem=1024),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_values_are_equal_by_value_immutable_and_survive_pickling(value):
    twin = copy.deepcopy(value)
    assert twin == value and twin is not value
    assert pickle.loads(pickle.dumps(value)) == value
    assert value.replace() == value
    assert value != object() and value != tuple(value.as_dict().values())
    if not isinstance(value, GridExpr):  # its tree is a list, as it was
        assert hash(twin) == hash(value)
    first = type(value).__slots__[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, first, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(value, first)


def test_a_value_differs_from_one_with_another_field():
    assert Span("k.py", 3) != Span("k.py", 4)
    assert Span("k.py", 3).replace(line=4) == Span("k.py", 4)
    assert Resources(registers=40) != Resources(registers=41)
    assert len({Span("k.py", 3), Span("k.py", 3), Span("k.py", 3, 1)}) == 2


def test_reprs_read_as_the_dataclass_ones_did():
    assert repr(Span("k.py", 3)) == "Span(file='k.py', line=3, col=0, end_col=None)"
    assert repr(Resources(registers=8)) == (
        "Resources(registers=8, stack_frame_bytes=0, spill_stores=0, spill_loads=0, "
        "shared_memory_bytes=0, barriers=None, constant_memory_bytes=None, "
        "spill_instructions=None, source='ptxas')")
    cubin = CompiledCubin("k", "sm_90a", b"\x7fELF", Resources(registers=8), "a long log")
    assert "ELF" not in repr(cubin) and "a long log" not in repr(cubin)
    assert repr(H100_SXM).startswith("Target(name='H100 SXM', arch='sm_90a', ")


def test_targets_derive_by_replace():
    plain = target_from_arch("sm_90")
    assert isinstance(plain, Target) and plain.arch == "sm_90" and not plain.has_wgmma
    assert plain.replace(arch="sm_90a", has_wgmma=True) == H100_SXM
    assert H200.sm_count == H100_SXM.sm_count and H200.memory_bytes != H100_SXM.memory_bytes
    assert Resources.from_json(Resources(registers=8).to_json()) == Resources(registers=8)


def _key(value) -> str:
    fp = Fingerprint()
    fp.value(value)
    return fp.hexdigest()


def test_the_jit_key_takes_values_by_value():
    assert _key(H100_SXM) == _key(copy.deepcopy(H100_SXM))
    assert _key(H100_SXM) != _key(A100_SXM)
    assert _key(Span("k.py", 3)) != _key(Span("k.py", 4))


def test_parameter_values_check_what_they_checked_as_dataclasses():
    with pytest.raises(ValueError, match="strides"):
        TensorParam("A", "float16", (4, 4), strides=(1,))
    with pytest.raises(ValueError, match="power of two"):
        TensorParam("A", "float16", (4,), align=3)
    with pytest.raises(ValueError, match="scalar kind"):
        ScalarParam("n", "int128")
    with pytest.raises(ValueError, match="1 to 3"):
        LaunchSpec(grid=(), block=(128,))
    assert repr(ScalarParam("n", "int32")) == "ScalarParam(name='n', kind='int32', dim=None)"
    assert TensorParam("A", "float16", (4,)).replace(align=16).align == 16

"""TMA tensor-map parameters: planned by the checker, made at launch from the tensor's address,
written into the parameter block, and recorded in the jit cache (no GPU needed)."""

import ctypes

import pytest
import torch
from test_launch_path_fake_driver import on_cuda

from tilecraft.runtime import ArgChecker, LaunchArgumentError, TensorMapParam, TensorParam
from tilecraft.runtime import tensor_map as tm
from tilecraft.runtime.launch import ParamBlock
from tilecraft.runtime.record import _param, _param_json

PARAMS = (TensorParam("A", "float16", (256, 64)), TensorParam("C", "float16", (256, 64)),
          TensorMapParam("A_tmap", "A", (128, 64), 128))


@pytest.mark.parametrize("shape, box, swizzle, why", [
    ((256, 64), (128, 64), 128, None),
    ((256, 64), (128, 32), 64, None),
    ((256, 60), (128, 32), 64, "multiples of 16 bytes"),  # a row of 120 bytes
    ((256, 64), (128, 128), 128, "exceeds the 128-byte swizzle"),
    ((256, 64), (512, 64), 128, "1..256"),
    ((256, 64), (128, 4), 0, "multiple of 16 bytes"),
    ((2**31, 64), (128, 64), 128, "below 2^31"),
])
def test_static_checks(shape, box, swizzle, why):
    got = tm.check_static("float16", shape, box, swizzle)
    assert (got is None) if why is None else (why in got)


def test_maps_are_not_passed_by_the_caller():
    checker = ArgChecker(PARAMS, kernel="k", outputs=("C",))
    assert [p.name for p in checker.caller_params] == ["A"]


def test_a_launch_makes_the_map_from_the_tensor_address(monkeypatch):
    made = []

    def fake_encode(address, dtype, shape, box, swizzle, name, split=0):
        made.append((address, dtype, tuple(shape), box, swizzle))
        return (ctypes.c_uint64 * 16)(*range(16))

    monkeypatch.setattr(tm, "encode", fake_encode)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: on_cuda(torch.zeros(256, 64)))
    checker = ArgChecker(PARAMS, kernel="k", outputs=("C",))
    a = on_cuda(torch.zeros(256, 64, dtype=torch.float16))
    values = checker.bind([a]).values
    checker.bind([a])  # the same tensor: the map is reused
    assert made == [(a.data_ptr(), "float16", (256, 64), (128, 64), 128)]
    block = ParamBlock(["pointer", "pointer", "tensormap"])
    block.fill(values)
    assert block.values()[2] == bytes((ctypes.c_uint64 * 16)(*range(16)))


def test_a_misaligned_tensor_is_refused_naming_it():
    checker = ArgChecker(PARAMS, kernel="k")
    base = torch.zeros(256 * 64 + 1, dtype=torch.float16)
    a = on_cuda(base[1:].view(256, 64))  # 2 bytes past an aligned address
    c = on_cuda(torch.zeros(256, 64, dtype=torch.float16))
    with pytest.raises(LaunchArgumentError, match="`A` cannot be read by TMA: .*16-byte aligned"):
        checker.bind([a, c])


def test_map_params_round_trip_through_json():
    p = PARAMS[2]
    assert _param(_param_json(p)) == p


def test_a_split_view_puts_the_column_blocks_outermost():
    # a (512, 1024) byte tensor seen as (1024 / 128 blocks, 512 rows, 128 bytes): one box of
    # (4, 8, 128) lands as 4 column blocks of 8 x 128, one after the other
    assert tm.split_view((512, 1024), 128, 1) == ([8, 512, 128], [128, 1024])
    assert tm.split_view((4, 16, 256), 64, 2) == ([4, 4, 16, 64], [128, 8192, 512])


def test_a_split_map_gives_the_driver_the_view(monkeypatch):
    from tilecraft.runtime import driver

    seen = {}

    class Lib:
        def cuTensorMapEncodeTiled(self, blob, code, rank, address, dims, strides, boxes, *rest):
            seen.update(rank=rank, dims=list(dims), strides=list(strides), boxes=list(boxes))
            return 0

    class Drv:
        lib = Lib()

    monkeypatch.setattr(driver, "driver_module", lambda: Drv())
    tm.encode(0x1000, "uint8", (512, 1024), (4, 8, 128), 128, "W", split=128)
    # innermost first, as the driver takes them
    assert seen == {"rank": 3, "dims": [128, 512, 8], "strides": [1024, 128],
                    "boxes": [128, 8, 4]}
    with pytest.raises(tm.TensorMapError, match="not a multiple of 128"):
        tm.encode(0x1000, "uint8", (512, 1000), (4, 8, 128), 128, "W", split=128)


def test_a_split_map_round_trips_through_the_record():
    p = TensorMapParam("W_tmap", "W", (4, 8, 128), 128, 128)
    assert _param(_param_json(p)) == p

"""The fast path's launch (runtime/fast_source.py) against what can change between calls outside
the arguments: the thread's current context, the tensor maps the parameter block holds, torch's
current stream, and a launch that fails. Over the recording libcuda stand-in, on a CPU machine."""

import threading

import pytest
import torch
from test_launch_fast_path import STREAM, good, libcuda, make_kernel  # noqa: F401 - a fixture
from test_launch_path_fake_driver import on_cuda

from tilecraft.runtime import CudaDriverError, LaunchArgumentError, TensorMapParam, TensorParam
from tilecraft.runtime import driver as drv_mod
from tilecraft.runtime import launch as launch_mod
from tilecraft.runtime.fast_call import MISS


def _record_context(libcuda):
    """Make the stand-in record the thread's current context with every launch."""
    contexts = []
    launch = libcuda.cuLaunchKernel

    def recording(*args):
        contexts.append(libcuda.current)
        return launch(*args)

    libcuda.cuLaunchKernel = recording
    return contexts


def test_a_fast_call_makes_the_primary_context_current_again(libcuda):
    kernel, binds = make_kernel(libcuda)
    contexts = _record_context(libcuda)
    kernel(*good())
    kernel(*good())
    primary = drv_mod.primary_context(0)
    libcuda.current = 0x9999  # another context made current on this thread since
    kernel(*good())
    assert len(binds) == 1 and len(libcuda.launches) == 3
    assert contexts == [primary] * 3


MAP_PARAMS = (TensorParam("A", "float16", (64, 64)),
              TensorMapParam("A_tmap", "A", box=(64, 64), swizzle=128))


def test_a_tensor_map_written_by_a_checked_launch_is_replaced_on_the_next_fast_call(libcuda):
    kernel, binds = make_kernel(libcuda, MAP_PARAMS, grid=(1,))
    x, y = (on_cuda(torch.zeros(64, 64, dtype=torch.float16)) for _ in range(2))
    kernel(x)
    kernel(x)  # fast: the block holds x's map
    kernel.launch(y, grid=(1,))  # the checker's launch writes y's map into the block
    kernel(x)  # fast again: x's map must go back in
    assert len(binds) == 2
    assert [launch[2] for launch in libcuda.launches] == [
        (t.data_ptr(), t.data_ptr()) for t in (x, x, y, x)]


def test_a_map_that_does_not_encode_on_the_fast_path_leaves_the_launcher_usable(libcuda):
    kernel, _ = make_kernel(libcuda, MAP_PARAMS, grid=(1,))
    x = on_cuda(torch.zeros(64, 64, dtype=torch.float16))
    kernel(x)
    kernel(x)
    odd = on_cuda(torch.zeros(64 * 64 + 4, dtype=torch.float16)[4:].view(64, 64))  # 8 bytes off
    assert kernel.fast_call((odd,), STREAM) is MISS
    with pytest.raises(LaunchArgumentError) as info:
        kernel(odd)
    assert info.value.code == "TC307"
    done = threading.Event()  # a lock left held would hang this call: run it on a thread
    threading.Thread(target=lambda: (kernel(x), done.set()), daemon=True).start()
    assert done.wait(10)
    assert [launch[2] for launch in libcuda.launches] == [(x.data_ptr(), x.data_ptr())] * 3


def test_each_fast_call_launches_on_torchs_stream_of_that_moment(libcuda, monkeypatch):
    kernel, binds = make_kernel(libcuda)
    streams = iter(range(0x100, 0x100 + 100))
    monkeypatch.setattr(launch_mod, "_raw_stream", lambda device: next(streams))
    calls = [good() for _ in range(100)]  # more streams than the fast path keeps converted
    for args in calls:
        kernel(*args)
    kernel(*calls[0], stream=0)  # the legacy default stream: NULL
    assert len(binds) == 1
    assert [launch[1] for launch in libcuda.launches] == list(range(0x100, 0x100 + 100)) + [0]


def test_a_failing_fast_launch_raises_the_driver_error_and_releases_the_launcher(libcuda):
    launch, failing = libcuda.cuLaunchKernel, []
    libcuda.cuLaunchKernel = lambda *args: 700 if failing else launch(*args)  # ILLEGAL_ADDRESS
    kernel, _ = make_kernel(libcuda)
    kernel(*good())
    failing.append(True)
    with pytest.raises(CudaDriverError, match="cuLaunchKernel"):
        kernel.fast_call(good(), STREAM)
    failing.clear()
    done = threading.Event()  # a lock left held would hang this call: run it on a thread
    threading.Thread(target=lambda: (kernel(*good()), done.set()), daemon=True).start()
    assert done.wait(10) and len(libcuda.launches) == 2


def test_strides_and_dtype_changed_in_place_after_fast_calls_are_checked_again(libcuda):
    kernel, binds = make_kernel(libcuda)
    x, y, alpha = good()
    for _ in range(3):
        kernel(x, y, alpha)
    y.as_strided_((300, 4), (1, 300))  # same shape, same storage: now column-major
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, y, alpha)
    assert info.value.code == "TC306"
    x, y, alpha = good()
    kernel(x, y, alpha)
    x.data = torch.zeros(300, dtype=torch.float64)  # the same Python object, another dtype
    with pytest.raises(LaunchArgumentError) as info:
        kernel(x, y, alpha)
    assert info.value.code == "TC303"
    assert len(binds) == 3 and len(libcuda.launches) == 4

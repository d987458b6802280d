"""A stand-in for libcuda as tilecraft's ctypes driver calls it (out-parameters by reference),
for the launch-path tests and benchmarks/launch_profile.py --cpu on machines without a GPU."""

import ctypes

_READ = {"pointer": ctypes.c_void_p, "float32": ctypes.c_float, "float64": ctypes.c_double,
         "tensormap": ctypes.c_uint64, "bool": ctypes.c_bool,
         **{f"{s}int{b}": getattr(ctypes, f"c_{s}int{b}")
            for s in ("", "u") for b in (8, 16, 32, 64)}}


class FakeLibcuda:
    """libcuda's entry points as the ctypes driver calls them (out-parameters by reference);
    cuLaunchKernel decodes the parameter block with `kinds`."""

    def __init__(self):
        self.kinds: list[str] = []
        self.launches: list[tuple] = []
        self.current = 0

    @staticmethod
    def _out(ref, value) -> int:
        getattr(ref, "_obj", ref).value = value
        return 0

    def cuInit(self, flags):  # noqa: N802 - the driver's names
        return 0

    def cuDeviceGet(self, ref, ordinal):  # noqa: N802
        return self._out(ref, ordinal)

    def cuDevicePrimaryCtxRetain(self, ref, dev):  # noqa: N802
        return self._out(ref, 0x1000 + dev)

    def cuCtxGetCurrent(self, ref):  # noqa: N802
        return self._out(ref, self.current or None)

    def cuCtxSetCurrent(self, ctx):  # noqa: N802
        self.current = int(ctx)
        return 0

    def cuModuleLoadData(self, ref, image):  # noqa: N802
        return self._out(ref, 0x2000)

    def cuModuleGetFunction(self, ref, module, name):  # noqa: N802
        return self._out(ref, 0x3000)

    def cuFuncGetAttribute(self, ref, attr, fn):  # noqa: N802
        return self._out(ref, 0)

    def cuFuncSetAttribute(self, fn, attr, value):  # noqa: N802
        return 0

    def cuGetErrorName(self, err, ref):  # noqa: N802
        return 1

    def cuTensorMapEncodeTiled(self, blob, dtype, rank, address, *rest):  # noqa: N802
        blob[0] = address  # a map that says which tensor it describes
        return 0

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):  # noqa: N802
        def raw(x):
            return getattr(x, "value", x) or 0

        slots = (ctypes.c_void_p * len(self.kinds)).from_address(raw(params))
        values = tuple(_READ[k].from_address(a).value for k, a in zip(self.kinds, slots))
        self.launches.append(((gx, gy, gz), raw(stream), values))
        return 0

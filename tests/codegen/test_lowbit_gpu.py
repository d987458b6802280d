"""Packed types (sub-byte ints, custom floats) on the GPU, bit-exact with the interpreter / block
VM running the same kernel on CPU tensors: copies and round trips of every type through global,
shared and registers (whole-byte stores and compare-and-swap stores where threads share bytes),
every code of every type cast to float16, bfloat16 and float32, a float32 sweep (ties,
subnormals, out of range, NaN) cast to every type, and the element-wise cast path with the fast
casts turned off."""

import lowbit_host as host
import numpy as np
import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import dtypes
from tilecraft.layout import local, spatial

PACKED = [t.name for t in host.FLOATS + host.INTS]
pytestmark = pytest.mark.gpu


def _torch():
    import torch

    return torch


def _random_bytes(dt: str, n: int, seed: int = 0):
    torch = _torch()
    codes = np.random.default_rng(seed).integers(0, 1 << dtypes.resolve(dt).bits, n)
    return torch.from_numpy(dtypes.pack(codes.astype(np.uint8), dt))


def _both(kernel, *args):
    """(outputs on the interpreter, outputs on the GPU) of `kernel` called on CPU tensors and on
    CUDA copies (every argument is written in place)."""
    cpu = [a.clone() for a in args]
    gpu = [a.clone().cuda() for a in args]
    kernel(*cpu)
    kernel(*gpu)
    return cpu, [g.cpu() for g in gpu]


def _same_bits(a, b) -> bool:
    torch = _torch()
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@tilecraft.jit
def round_trip(dt, rows=16, cols=64):
    @T.prim_func
    def k(W: T.Tensor((rows, cols), dt), Z: T.Tensor((rows, cols), dt),
          P: T.Tensor((rows, cols), dt), Q: T.Tensor((rows, cols), dt)):
        with T.Kernel(1, threads=128) as bx:
            ws = T.alloc_shared((rows, cols), dt)
            wf = T.alloc_fragment((rows, cols), dt)
            T.copy(W[0, 0], ws)  # global -> registers -> shared: whole bytes
            T.copy(ws, wf)
            T.copy(wf, Z[0, 0])
            for i, j in T.Parallel(rows, cols):
                P[i, j] = wf[i, j]  # element stores: compare-and-swap below 8 bits
            w = T.load_global(W, layout=local(1, 8).spatial(16, 8))  # neighbours in other threads
            T.store_global(w, Q)

    return k


@pytest.mark.parametrize("dt", PACKED)
def test_every_type_round_trips_through_global_shared_and_registers(dt):
    torch = _torch()
    w = _random_bytes(dt, 16 * 64)
    zeros = [torch.zeros_like(w) for _ in range(3)]
    cpu, gpu = _both(round_trip(dt), w, *zeros)
    for out_cpu, out_gpu in zip(cpu[1:], gpu[1:]):
        assert torch.equal(out_gpu, w) and torch.equal(out_cpu, w)


@tilecraft.jit
def shared_bytes(dt, n=1024):
    @T.prim_func
    def k(W: T.Tensor((n,), dt), Z: T.Tensor((n,), dt)):
        with T.Kernel(1, threads=128) as bx:
            for r in range(4):  # one element per thread per store: 8 / b threads per byte
                w = T.load_global(W, layout=spatial(128), offset=[r * 256])
                T.store_global(w, Z, offset=[r * 256])
                v = T.load_global(W, layout=spatial(128), offset=[r * 256 + 128])
                T.store_global(v, Z, offset=[r * 256 + 128])

    return k


@pytest.mark.parametrize("dt", ["uint1", "uint2", "uint3", "int4", "int6", "float3_e1m1",
                                "float7_e3m3"])
def test_stores_of_threads_sharing_bytes_lose_nothing(dt):
    torch = _torch()
    w = _random_bytes(dt, 1024, seed=3)
    for _ in range(3):  # (a race would show up as lost bits on some run)
        cpu, gpu = _both(shared_bytes(dt), w, torch.zeros_like(w))
        assert torch.equal(gpu[1], w) and torch.equal(cpu[1], w)


@tilecraft.jit
def to_floats(dt, n=256):
    @T.prim_func
    def k(W: T.Tensor((n,), dt), H: T.Tensor((n,), "float16"), B: T.Tensor((n,), "bfloat16"),
          F: T.Tensor((n,), "float32"), H2: T.Tensor((n,), "float16"),
          B2: T.Tensor((n,), "bfloat16"), F2: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):  # element casts in a parallel loop
                H[i] = T.cast(W[i], "float16")
                B[i] = T.cast(W[i], "bfloat16")
                F[i] = T.cast(W[i], "float32")
            w = T.load_global(W, layout=spatial(32).local(8))  # register casts (fast where planned)
            T.store_global(T.cast(w, "float16"), H2)
            T.store_global(T.cast(w, "bfloat16"), B2)
            T.store_global(T.cast(w, "float32"), F2)

    return k


def _every_code(dt: str):
    """Codes 0, 1, ... (repeating) as the kernel parameter takes them: packed bytes (int8: its
    own dtype)."""
    torch = _torch()
    codes = np.arange(256) % (1 << dtypes.resolve(dt).bits)
    data = torch.from_numpy(dtypes.pack(codes.astype(np.uint8), dt))
    return data.view(torch.int8) if dt == "int8" else data


def _float_outputs(n: int = 256):
    torch = _torch()
    return [torch.zeros(n, dtype=t) for t in (torch.float16, torch.bfloat16, torch.float32) * 2]


@pytest.mark.parametrize("dt", PACKED)
def test_every_code_casts_to_16_and_32_bit_floats_like_the_interpreter(dt):
    cpu, gpu = _both(to_floats(dt), _every_code(dt), *_float_outputs())
    for out_cpu, out_gpu in zip(cpu[1:], gpu[1:]):
        assert _same_bits(out_cpu, out_gpu)
    want = dtypes.resolve(dt).to_float(np.arange(256) % (1 << dtypes.resolve(dt).bits))
    assert np.array_equal(cpu[3].numpy(), want.astype(np.float32))


@tilecraft.jit
def from_float32(dt, blocks):
    n = 256 * blocks

    @T.prim_func
    def k(X: T.Tensor((n,), "float32"), Z: T.Tensor((n,), dt), Z2: T.Tensor((n,), dt)):
        with T.Kernel(blocks, threads=32) as bx:
            for i in T.Parallel(256):
                Z[bx * 256 + i] = T.cast(X[bx * 256 + i], dt)
            x = T.load_global(X, layout=spatial(32).local(8), offset=[bx * 256])
            T.store_global(T.cast(x, dt), Z2, offset=[bx * 256])

    return k


@pytest.mark.parametrize("dt", PACKED)
def test_a_float32_sweep_casts_to_every_type_like_the_interpreter(dt):
    torch = _torch()
    f, _ = host.float_sweep()
    blocks = -(-len(f) // 256)
    x = np.zeros(256 * blocks, np.float32)
    x[:len(f)] = f
    nbytes = dtypes.packed_nbytes(len(x), dtypes.resolve(dt))
    z = [torch.zeros(nbytes, dtype=torch.uint8) for _ in range(2)]
    cpu, gpu = _both(from_float32(dt, blocks), torch.from_numpy(x), *z)
    with np.errstate(invalid="ignore"):
        want = dtypes.pack(dtypes.resolve(dt).encode(dtypes.resolve(dt).cast_array(x)), dt)
    for out_cpu, out_gpu in zip(cpu[1:], gpu[1:]):
        assert torch.equal(out_cpu, out_gpu) and np.array_equal(out_gpu.numpy(), want)


@pytest.mark.parametrize("dt", ["uint4", "int4", "uint8", "int8", "int6", "uint2",
                                "float8_e4m3", "float6_e3m2", "float4_e2m1", "float3_e1m1"])
def test_the_element_wise_cast_path_matches_the_interpreter(dt, monkeypatch):
    """The register casts of `to_floats` with every fast cast turned off (the printer's hook)."""
    from tilecraft.codegen.block_cuda.printer import BlockPrinter
    from tilecraft.codegen.cuda.build import build_cuda_kernel

    monkeypatch.setattr(BlockPrinter, "fast_cast", lambda self, s: False)
    kernel = build_cuda_kernel(to_floats.factory(dt), "sm_90a")
    assert "tc::fast_cast" not in kernel.source
    args = [_every_code(dt), *_float_outputs()]
    gpu = [a.clone().cuda() for a in args]
    kernel(*gpu)
    cpu = [a.clone() for a in args]
    to_floats(dt)(*cpu)
    for out_cpu, out_gpu in zip(cpu[1:], gpu[1:]):
        assert _same_bits(out_cpu, out_gpu.cpu())


@tilecraft.jit
def arithmetic(dt, n=256):
    """Element-wise arithmetic of packed values: custom floats in float rounded after every
    operation, sub-byte ints in int wrapped to their width (the interpreter's rules)."""
    is_int = dtypes.resolve(dt).is_integer

    @T.prim_func
    def k(A: T.Tensor((n,), dt), B: T.Tensor((n,), dt), C: T.Tensor((n,), dt),
          D: T.Tensor((n,), dt), F: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                a, b = A[i], B[i]
                C[i] = T.if_then_else(a < b, a * b - a, T.max(a, b) + b)
                if is_int:
                    D[i] = (a // T.if_then_else(b == 0, T.cast(1, dt), b)) ^ (a >> 1) | T.abs(a)
                else:
                    D[i] = T.exp(a) / T.if_then_else(b == 0, T.cast(1.0, dt), b) - T.abs(a)
                F[i] = T.cast(a, "float32") * T.cast(b, "float32") + T.cast(-a, "float32")

    return k


@pytest.mark.parametrize("dt", ["int2", "int4", "uint3", "int7", "uint5", "float3_e1m1",
                                "float4_e2m1", "float6_e3m2", "float5_e3m1", "float8_e3m4"])
def test_element_wise_arithmetic_on_packed_values_matches_the_interpreter(dt):
    torch = _torch()
    a, b = _random_bytes(dt, 256, seed=5), _random_bytes(dt, 256, seed=6)
    outs = [torch.zeros_like(a), torch.zeros_like(a), torch.zeros(256)]
    cpu, gpu = _both(arithmetic(dt), a, b, *outs)
    for out_cpu, out_gpu in zip(cpu[2:], gpu[2:]):
        assert _same_bits(out_cpu, out_gpu)

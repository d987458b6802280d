"""The Tilus level of the language: kernels written with T.allocate_register / T.load_global /
T.dot / T.store_global / copy_async / arithmetic on register tensors run on the block VM (CPU
tensors) and through the block printer (CUDA tensors), and mistakes are located errors."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilecraft
import tilecraft.language as T
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import local, replicate, spatial

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from tilus_matmul import tilus_matmul
from tilus_matmul_shared import tilus_matmul_shared

ROWS = spatial(16, 8).local(1, 4)  # [16, 32] over 128 threads


@tilecraft.jit
@T.prim_func
def affine(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):
    with T.Kernel(2, threads=128) as bi:
        x = T.load_global(X, layout=ROWS, offset=[bi * 16, 0])
        y = -((x * 2.0 + 1.0) / 3.0 - x)
        T.store_global(y, Y, offset=[bi * 16, 0])


def _mm_inputs(device="cpu"):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 64, generator=g).half()
    b = torch.randn(64, 16, generator=g).half()
    return a.to(device), b.to(device), (a.double() @ b.double())


def _rel(out, ref):
    return ((out.double().cpu() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("shared", [False, True])
def test_the_figure_2_matmul_runs_on_the_block_vm(shared):
    a, b, ref = _mm_inputs()
    c = torch.full((128, 16), float("nan"), dtype=torch.float32 if shared else torch.float16)
    (tilus_matmul_shared if shared else tilus_matmul)(128, 16, 64)(a, b, c)
    assert _rel(c, ref) < (1e-6 if shared else 1e-3)


def test_arithmetic_on_register_tensors_means_the_tile_ir_ops():
    x = torch.randn(32, 32)
    y = torch.full((32, 32), float("nan"))
    affine(x, y)
    xf = x.numpy()
    want = -(((xf * np.float32(2) + np.float32(1)) / np.float32(3)) - xf)
    np.testing.assert_array_equal(y.numpy(), want)


def test_the_kernel_prints_its_block_instructions_and_picks_mma():
    pytest.importorskip("cuda.bindings.nvrtc")
    k = tilecraft.jit(arch="sm_90a")(tilus_matmul.factory)(128, 16, 64)
    assert "load_global(A, offset=[bi * 64, k * 16], out=a)" in k.func.script()
    src = k.get_kernel_source()
    assert "tc::mma_m16n8k16_f16_f32(" in src and k.resources.spill_stores == 0


def test_a_layout_that_is_not_a_register_layout_is_tc603_at_its_line():
    with pytest.raises(TilecraftError) as e:  # when the kernel is parsed

        @T.prim_func
        def bad(X: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, threads=128) as bi:
                x = T.load_global(X, layout="row_major")  # ERR
                T.store_global(x, X)

    assert e.value.code == "TC603" and "# ERR" in e.value.span.source_line()


@pytest.mark.gpu
@pytest.mark.parametrize("shared", [False, True])
def test_the_figure_2_matmul_on_the_gpu(shared):
    a, b, ref = _mm_inputs("cuda")
    c = torch.full((128, 16), float("nan"), device="cuda",
                   dtype=torch.float32 if shared else torch.float16)
    (tilus_matmul_shared if shared else tilus_matmul)(128, 16, 64)(a, b, c)
    assert _rel(c, ref) < (1e-6 if shared else 1e-3)


@pytest.mark.gpu
def test_arithmetic_on_the_gpu_matches_the_vm():
    x = torch.randn(32, 32)
    want = torch.full((32, 32), float("nan"))
    affine(x, want)
    y = torch.full((32, 32), float("nan"), device="cuda")
    affine(x.cuda(), y)
    torch.testing.assert_close(y.cpu(), want, rtol=0, atol=0)


from tilus_softmax import tilus_softmax


def _softmax_case(device="cpu"):
    g = torch.Generator().manual_seed(1)
    x = (3 * torch.randn(64, 256, generator=g)).half().to(device)
    return x, torch.softmax(x.double().cpu(), dim=-1)


def test_softmax_reduces_and_broadcasts_in_registers():
    x, ref = _softmax_case()
    y = torch.full_like(x, float("nan"))
    tilus_softmax(64, 256)(x, y)
    assert _rel(y, ref) < 1e-3


@tilecraft.jit
@T.prim_func
def wrong_broadcast(X: T.Tensor((4, 256), "float32"), M: T.Tensor((4, 1), "float32"),
                    Y: T.Tensor((4, 256), "float32")):
    with T.Kernel(1, threads=128) as bi:
        x = T.load_global(X, layout=local(4, 1) * spatial(1, 128) * local(1, 2))
        m = T.load_global(M, layout=spatial(4, 1) * replicate(32))
        T.store_global(x - m, Y)  # ERR: thread 0 holds all four rows of x, one value of m


def test_a_broadcast_the_layouts_do_not_support_is_tc603_at_its_line():
    with pytest.raises(TilecraftError) as e:
        wrong_broadcast(torch.zeros(4, 256), torch.zeros(4, 1), torch.zeros(4, 256))
    assert e.value.code == "TC603" and "# ERR" in e.value.span.source_line()


@pytest.mark.gpu
def test_softmax_on_the_gpu():
    x, ref = _softmax_case("cuda")
    y = torch.full_like(x, float("nan"))
    tilus_softmax(64, 256)(x, y)
    assert _rel(y, ref) < 1e-3


def test_softmax_compiles_with_constant_broadcast_tables():
    pytest.importorskip("cuda.bindings.nvrtc")
    k = tilecraft.jit(arch="sm_90a")(tilus_softmax.factory)(64, 256)
    assert "const int bslot" in k.get_kernel_source() and k.resources.spill_stores == 0


def test_a_reduction_of_something_that_is_not_a_register_tensor_is_tc603_at_its_line():
    with pytest.raises(TilecraftError) as e:

        @T.prim_func
        def bad(X: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, threads=128) as bi:
                s = T.sum(X, dim=1)  # ERR
                T.store_global(s, X)

    assert e.value.code == "TC603" and "# ERR" in e.value.span.source_line()

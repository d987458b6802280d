"""T.call_extern(dtype, name, *args) prints a call of a CUDA device function by name (the
interpreter cannot run it and says so); a name that is not a C++ identifier is refused."""

import pytest

import tilecraft
import tilecraft.language as T
from tilecraft import TilecraftError
from tilecraft.codegen.cuda.build import generate_cuda


def fast_exp():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(128):
                B[i] = T.call_extern("float32", "__expf", A[i])

    return k


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_call_extern_prints_the_call_and_compiles(arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(fast_exp(), arch)
    assert "B_[i_] = __expf(A_[i_]);" in gen.source
    compile_cuda(gen.source, arch, name=gen.name, use_cache=False)


def test_call_extern_on_the_interpreter_is_refused():
    import torch

    with pytest.raises(TilecraftError) as err:
        tilecraft.compile(fast_exp(), target="interp")(torch.ones(128), torch.ones(128))
    assert err.value.code == "TC403"


def test_a_call_extern_name_that_is_not_an_identifier_is_refused():
    with pytest.raises(TilecraftError) as err:
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    A[i] = T.call_extern("float32", "exp(x); evil", A[i])
    assert err.value.code == "TC108"

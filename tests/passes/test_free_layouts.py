"""Free layouts put every thread to work: 16-byte vectors where the tile has enough elements,
narrower vectors rather than idle replicas where it has not."""

import itertools

import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.layout import local, spatial
from tilecraft.passes import lower
from tilecraft.passes.layout_inference.free import free_layout
from tilecraft.targets import H100_SXM


def _layouts(func):
    return {b.name: lay for b, lay in lower(func, H100_SXM).layouts.items()}


def test_a_short_fp16_row_spreads_over_every_thread():
    @T.prim_func
    def k(A: T.Tensor((256,), "float16"), B: T.Tensor((256,), "float16")):
        with T.Kernel(1, threads=128) as bx:
            r = T.alloc_fragment((256,), "float16")
            T.copy(A[0], r)
            for i in T.Parallel(256):
                r[i] = r[i] * 2
            T.copy(r, B[0])

    assert _layouts(k)["r"] == spatial(128) * local(2)


def test_the_fuzzers_40_column_int64_tile_holds_half_the_registers():
    @T.prim_func
    def k(A: T.Tensor((5, 40), "int64"), B: T.Tensor((5, 40), "int64")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((5, 40), "int64")
            T.copy(A[0, 0], f)
            T.copy(f, B[0, 0])

    lay = _layouts(k)["f"]
    assert lay.local_size == 25 and lay.replication == 16  # was 50 registers on 4 threads


def test_a_float32_fragment_loaded_from_fp16_moves_16_byte_vectors():
    @T.prim_func
    def k(X: T.Tensor((4, 1024), "float16"), Y: T.Tensor((4, 1024), "float16")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((4, 1024), "float16")
            x = T.alloc_fragment((4, 1024), "float32")
            y = T.alloc_fragment((4, 1024), "float16")
            T.copy(X[0, 0], s)
            T.copy(s, x)
            for i, j in T.Parallel(4, 1024):
                y[i, j] = x[i, j] * 2
            T.copy(y, Y[0, 0])

    src = generate_cuda(k, "sm_90a").source
    load = src.split("// load_shared(s, ")[1].split("// cast(")[0]
    store = src.split("// store_global(y, Y, ")[1]
    assert "tc::load_vec<half, 8>" in load
    assert "tc::Vec<half, 8>" in store


def test_free_layouts_cover_each_element_equally_and_idle_no_thread_they_could_use():
    for shape in [(n,) for n in (1, 2, 8, 48, 64, 256, 1000, 4096)] + \
            list(itertools.product((1, 3, 4, 16), (2, 40, 64, 96, 128))):
        for threads, e in itertools.product((32, 128, 256), (1, 2, 4, 8)):
            lay = free_layout(shape, threads, e)
            assert tuple(lay.shape) == shape and lay.num_threads == threads
            held = lay.local_size * threads // lay.replication
            assert held == lay.size  # a bijection up to replication
            if lay.size % threads == 0 and shape[-1] % threads == 0:
                assert lay.replication == 1, (shape, threads, e, lay)


def test_wide_rows_take_a_warp_each_so_their_reductions_need_no_shared_memory():
    @T.prim_func
    def k(X: T.Tensor((4, 4096), "float16"), S: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((4, 4096), "float32")
            s = T.alloc_fragment((4,), "float32")
            T.copy(X[0, 0], x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S[0])

    assert _layouts(k)["x"] == local(1, 16) * spatial(4, 32) * local(1, 8)
    src = generate_cuda(k, "sm_90a").source
    reduce = src.split("// reduce_sum(x, ")[1].split("// store_global(")[0]
    assert "__shfl_xor_sync" in reduce and "tc_smem" not in reduce and "__syncthreads" not in reduce

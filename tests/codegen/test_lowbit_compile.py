"""Packed types (sub-byte ints, custom floats) on the CUDA backend, without a GPU: lowbit.cuh's
codecs and bit fields run on the host against tilecraft.dtypes (every code, a float sweep with
ties, subnormals, out-of-range values and NaN), the byte-ownership analysis of stores against
the packing rule, the printed forms (whole-byte stores, compare-and-swap, words), located
refusals, and every type compiling through NVRTC for sm_80 and sm_90a in both language levels
(parameter, shared tile, fragment, register tensor, local array) with no spills."""

import lowbit_host as host
import numpy as np
import pytest

import tilecraft.language as T
from tilecraft import dtypes
from tilecraft.codegen.block_cuda.subbyte import whole_bytes
from tilecraft.codegen.cuda.build import generate_cuda
from tilecraft.diagnostics import TilecraftError
from tilecraft.layout import local, replicate, spatial

PACKED = [t.name for t in host.FLOATS + host.INTS]
ARCHS = ["sm_80", "sm_90a"]
needs_gxx = pytest.mark.skipif(not host.have_compiler(), reason="no host C++ compiler")


# ---- the device library on the host ---------------------------------------------------------
@needs_gxx
def test_codecs_match_the_interpreter_on_every_code_and_a_float_sweep():
    with np.errstate(invalid="ignore"):  # (signalling NaNs in the sweep)
        f, d = host.float_sweep()
        out = host.run(host.codec_program(len(f), len(d)), f.tobytes() + d.tobytes())
        both = np.concatenate([f.astype(np.float64), d])
        pos = 0
        for t in host.FLOATS + host.INTS:
            n = 1 << t.bits
            decoded, pos = out[pos:pos + n], pos + n
            encoded, pos = out[pos:pos + len(both)], pos + len(both)
            if t.is_float:  # decode exactly; encode = from_float = the kernel's cast (NaN -> +0)
                want = t.to_float(np.arange(n)).astype(np.float32).view(np.uint32)
                codes = np.concatenate([t.from_float(f.astype(np.float64)), t.from_float(d)])
                assert np.array_equal(t.cast_array(both), t.to_float(codes))
            else:  # sign extension; float -> int truncates toward zero and saturates, NaN -> 0
                want = t.decode(np.arange(n).astype(np.uint8)).astype(np.int32).view(np.uint32)
                codes = np.concatenate([t.encode(t.cast_array(f)), t.encode(t.cast_array(d))])
            assert np.array_equal(decoded, want), t.name
            bad = np.nonzero(encoded != codes.astype(np.uint32))[0]
            assert bad.size == 0, (t.name, [(both[i], encoded[i], codes[i]) for i in bad[:4]])
        assert pos == len(out)


@needs_gxx
def test_the_sweep_holds_the_cases_that_matter():
    f, d = host.float_sweep()
    t = dtypes.float4_e2m1
    assert {0.25, 2.5, 5.0, 7.0, 12.0} <= set(f.tolist())  # subnormal tie, ties, beyond max
    assert np.isnan(f).any() and np.isinf(f).any() and (f == 0).any()
    assert t.from_float([0.25, 2.5, 5.0, -7.0, np.nan])[[0, 1, 2]].tolist() == [0, 4, 6]
    assert len(d) > 3000


@needs_gxx
@pytest.mark.parametrize("bits", range(1, 9))
def test_bit_fields_follow_the_packing_rule(bits):
    n = 37
    codes = np.random.default_rng(bits).integers(0, 1 << bits, n).astype(np.uint32)
    words = -(-n * bits // 32)
    out = host.run(host.bitfield_program(n, bits), codes.tobytes())
    packed = dtypes.pack(codes.astype(np.uint8), dtypes.int_type(bits, signed=False)) \
        if bits < 8 else codes.astype(np.uint8)
    image = np.zeros(4 * words, np.uint8)
    image[:len(packed)] = packed
    assert np.array_equal(out[:words].view(np.uint8), image)  # bits_set: the packed bytes
    assert np.array_equal(out[words:words + n], codes)  # bits_get
    assert np.array_equal(out[words + n:words + 2 * n], codes)  # bits_load (straddles)
    stored = out[words + 2 * n:].reshape(4, words + 1).view(np.uint8)[:, :4 * words]
    assert (stored == image).all()  # bits_store_atomic from every base alignment
    assert len(out) == words + 2 * n + 4 * (words + 1)


@needs_gxx
def test_casts_dispatch_by_source_and_destination():
    """int32 -> custom float rounds once (through double); int -> sub-byte int wraps; float ->
    sub-byte int truncates and saturates; between packed types through the exact value."""
    body = """
  unsigned w[8];
  w[0] = tc::code(tc::cast<tc::SubFloat<7, 0> >(50331649));  // 1.5 * 2^25 + 1: above the tie
  w[1] = tc::code(tc::cast<tc::SubInt<4, true> >(23));  // wraps to 7
  w[2] = tc::code(tc::cast<tc::SubInt<4, true> >(-9.75f));  // saturates to -8
  w[3] = tc::code(tc::cast<tc::SubInt<3, false> >(tc::from_code<tc::SubFloat<2, 1> >(5)));
  w[4] = tc::code(tc::cast<tc::SubFloat<2, 1> >(tc::from_code<tc::SubInt<4, true> >(13)));
  w[5] = (unsigned)tc::cast<int>(tc::from_code<tc::SubInt<4, true> >(9));
  w[6] = tc::code(tc::cast<tc::SubInt<2, true> >(tc::from_code<tc::SubInt<4, false> >(14)));
  w[7] = tc::code(tc::cast<tc::SubFloat<3, 2> >(tc::from_code<tc::SubFloat<2, 3> >(0x1f)));
  fwrite(w, 4, 8, out);"""
    got = host.run(body).tolist()
    e7m0, i4, u3, e2m1 = (dtypes.resolve(n) for n in ("float8_e7m0", "int4", "uint3",
                                                      "float4_e2m1"))
    want = [int(e7m0.from_float(50331649.0)), int(i4.encode(23 - 16)), int(i4.encode(-8)),
            int(u3.encode(u3.cast_array(e2m1.to_float(5)))),
            int(e2m1.from_float(-3.0)), -7 & 0xFFFFFFFF, int(dtypes.int2.encode(-2)),
            int(dtypes.float6_e3m2.from_float(dtypes.float6_e2m3.to_float(0x1F)))]
    assert got == want
    assert e7m0.to_float(got[0]) == 2.0**26  # through float it would tie down to 2^25


# ---- byte ownership of stores ---------------------------------------------------------------
def _simulate(bits: int, rel: np.ndarray, base: int, groups) -> tuple[np.ndarray, np.ndarray]:
    """The bytes the plan's plain stores write (every thread) and the packed reference, for
    element index base + rel[t, li] holding code (base + rel) mod 2^bits."""
    flat = base + rel
    codes = flat % (1 << bits)
    ref = dtypes.pack(np.arange(flat.max() + 1) % (1 << bits),
                      dtypes.int_type(bits, signed=False))
    got = np.zeros_like(ref)
    written = np.zeros(len(ref), bool)
    for t in range(rel.shape[0]):
        for g in groups:
            p = g[0]
            at = (int(flat[t, p.li]) * bits + p.elem_lo) // 8
            got[at] = sum((int(codes[t, q.li]) >> q.elem_lo) << q.byte_lo for q in g) & 0xFF
            written[at] = True
    return got[written], ref[written]


@pytest.mark.parametrize("bits", range(1, 8))
@pytest.mark.parametrize("layout", [spatial(16, 8).local(1, 8),
                                    local(2, 1).spatial(8, 4).local(1, 8),
                                    replicate(2, 2).spatial(4, 8).local(1, 8)])
def test_whole_byte_plans_write_the_packed_bytes(bits, layout):
    table = layout.index_table()
    cols = layout.shape[1] + 8  # a row wider than the tile
    rel = table[..., 0] * cols + table[..., 1]
    for base in (0, 8, 5 * cols * 8):  # tile bases on byte boundaries
        groups = whole_bytes(bits, rel, base * bits % 8)
        assert groups is not None
        got, want = _simulate(bits, rel, base, groups)
        assert np.array_equal(got, want) and len(got) > 0


@pytest.mark.parametrize("bits", [1, 3, 4, 6, 7])
def test_layouts_where_threads_share_bytes_have_no_whole_byte_plan(bits):
    one_each = local(4).spatial(32).index_table()[..., 0]
    assert whole_bytes(bits, one_each, 0) is None
    pairs = (local(2, 1).spatial(8, 4).local(1, 2)).index_table()
    rel = pairs[..., 0] * 8 + pairs[..., 1]  # two neighbours per thread: whole bytes at 4 bits
    assert (whole_bytes(bits, rel, 0) is None) == (bits != 4)
    assert whole_bytes(4, rel, None) is None and whole_bytes(4, rel, 4) is None  # base unknown


# ---- printed forms and refusals -------------------------------------------------------------
def _copy_through(dt: str, n: int = 64):
    @T.prim_func
    def k(W: T.Tensor((16, n), dt), Z: T.Tensor((16, n), dt), O: T.Tensor((128,), dt)):
        with T.Kernel(1, threads=128) as bx:
            ws = T.alloc_shared((16, n), dt)
            wf = T.alloc_fragment((16, n), dt)
            T.copy(W[0, 0], ws)
            T.copy(ws, wf)
            T.copy(wf, Z[0, 0])
            o = T.load_global(O, layout=local(1).spatial(128))
            T.store_global(o, O)
    return k


def test_packed_tensors_print_as_bytes_and_words_with_whole_byte_stores_where_proven():
    source = generate_cuda(_copy_through("uint4"), "sm_90a").source
    assert "unsigned char* __restrict__ W_" in source and "unsigned char* ws_ = tc_smem" in source
    assert "tc::u32 wf_[1] = {};" in source  # 8 x 4 bits per thread
    assert '#include "tilecraft/lowbit.cuh"' in source
    z_stores = [x for x in source.splitlines() if "Z_[" in x]
    assert len(z_stores) == 4 and all("(unsigned char)(" in x for x in z_stores)
    o_stores = [x for x in source.splitlines() if "(O_," in x]  # one uint4 per thread
    assert [x.split("(O_")[0].strip() for x in o_stores] == [
        "tc::bits_set<4>(o_, li, tc::bits_load<4>", "tc::bits_store_atomic<4>"]


def test_an_8_bit_custom_float_moves_in_byte_vectors():
    source = generate_cuda(_copy_through("float8_e3m4"), "sm_90a").source
    assert "tc::load_vec<unsigned char, 8>" in source and "bits_store_atomic" not in source
    assert "reinterpret_cast<unsigned char*>(wf_)" in source


def test_a_reduction_of_a_packed_fragment_is_tc502_at_its_line():
    @T.prim_func
    def k(W: T.Tensor((32, 64), "int4"), O: T.Tensor((32,), "int4")):
        with T.Kernel(1, threads=128) as bx:
            wf = T.alloc_fragment((32, 64), "int4")
            of = T.alloc_fragment((32,), "int4")
            T.copy(W[0, 0], wf)
            T.reduce_sum(wf, of, dim=1)  # ERR
            T.copy(of, O[0])

    with pytest.raises(TilecraftError) as e:
        generate_cuda(k, "sm_90a")
    assert e.value.code == "TC502" and "# ERR" in e.value.span.source_line()
    assert "int4 tensor `wf`" in e.value.message


def test_a_gemm_of_packed_operands_stays_tc502_at_its_line():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float4_e2m1"), C: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((16, 16), "float4_e2m1")
            b = T.alloc_shared((16, 8), "float4_e2m1")
            c = T.alloc_fragment((16, 8), "float32")
            T.copy(A[0, 0], a)
            T.gemm(a, b, c)  # ERR
            T.copy(c, C[0, 0])

    with pytest.raises(TilecraftError) as e:
        generate_cuda(k, "sm_90a")
    assert e.value.code == "TC502" and "# ERR" in e.value.span.source_line()


# ---- every type compiles --------------------------------------------------------------------
def _every_path(dt: str):
    """Both levels: a packed parameter, shared tile, fragment, local array and register tensor;
    casts both ways, arithmetic, comparison, select, view."""

    @T.prim_func
    def k(W: T.Tensor((64, 64), dt), X: T.Tensor((64, 64), "float32"),
          Y: T.Tensor((64, 64), "float32"), Z: T.Tensor((64, 64), dt)):
        with T.Kernel(2, threads=128) as bx:
            ws = T.alloc_shared((32, 64), dt)
            wf = T.alloc_fragment((32, 64), dt)
            zf = T.alloc_fragment((32, 64), dt)
            loc = T.alloc_local((2,), dt)
            T.copy(W[bx * 32, 0], ws)
            T.copy(ws, wf)
            for i, j in T.Parallel(32, 64):
                x = X[bx * 32 + i, j]
                Y[bx * 32 + i, j] = T.cast(wf[i, j], "float32") + x
                zf[i, j] = T.if_then_else(wf[i, j] > T.cast(x, dt), wf[i, j] + wf[i, j],
                                          T.max(wf[i, j], T.cast(x, dt)))
            T.copy(zf, Z[bx * 32, 0])
            loc[0] = W[bx, 1]
            loc[1] = loc[0] * loc[0]
            Z[bx, 2] = loc[1]
            r = T.load_global(W, layout=local(2, 1).spatial(8, 16).local(1, 4),
                              offset=[bx * 16, 0])
            v = T.view(r, dtype=dt, layout=local(1, 8).spatial(16, 8))
            f = T.cast(v, "float16")
            q = T.cast(T.cast(f, "float32") * 2.0, dt)
            T.store_global(q, Z, offset=[bx * 16, 0])

    return k


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", PACKED)
def test_every_packed_type_compiles_on_every_path_without_spills(dt, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(_every_path(dt), arch)
    res = compile_cuda(gen.source, arch, name=gen.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0, res
    assert res.stack_frame_bytes == 0, res  # the packed words stay in registers


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["matmul_int6", "transform_int6",
                                  "through_view_global"])
def test_tilus_figures_2_and_9_compile_without_spills(name, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tests.tilus import test_view
    from tilecraft.runtime import compile_cuda

    gen = generate_cuda(getattr(test_view, name).func, arch)
    res = compile_cuda(gen.source, arch, name=gen.name).resources
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_frame_bytes == 0, res


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", ["uint1", "int4", "uint3", "int6", "float4_e2m1", "float8_e3m4"])
def test_the_kernels_of_the_gpu_tests_compile_without_spills(dt, arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tests.codegen import test_lowbit_gpu as gpu
    from tilecraft.runtime import compile_cuda

    for func in (gpu.round_trip.factory(dt), gpu.shared_bytes.factory(dt),
                 gpu.to_floats.factory(dt), gpu.from_float32.factory(dt, 2),
                 gpu.arithmetic.factory(dt)):
        gen = generate_cuda(func, arch)
        res = compile_cuda(gen.source, arch, name=gen.name).resources
        assert res.spill_stores == 0 and res.stack_frame_bytes == 0, (gen.name, res)


STANDARD_C = ["float", "double", "__half", "__nv_bfloat16", "__nv_fp8_e4m3", "__nv_fp8_e5m2",
              "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned",
              "long long", "unsigned long long", "bool"]
PACKED_C = ["tc::SubInt<1, false>", "tc::SubInt<4, true>", "tc::SubInt<7, false>",
            "tc::SubFloat<1, 0>", "tc::SubFloat<2, 1>", "tc::SubFloat<3, 4>", "tc::SubFloat<7, 0>"]


@pytest.mark.parametrize("arch", ARCHS)
def test_tc_cast_compiles_between_packed_and_every_scalar_type(arch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tilecraft.runtime import compile_cuda

    lines = []
    for k, p in enumerate(PACKED_C):
        lines.append(f"  const {p} p{k} = tc::from_code<{p}>(c[{k}]);")
        for j, s in enumerate(STANDARD_C):
            lines.append(f"  {{ const {s} x = tc::cast<{s}>(p{k}); "
                         f"o[{k}] ^= tc::code(tc::cast<{p}>(x)); }}")
        for q in PACKED_C:
            lines.append(f"  o[{k}] ^= tc::code(tc::cast<{p}>(tc::cast<{q}>(p{k})));")
    source = ('#include "tilecraft/common.cuh"\n#include "tilecraft/fp8.cuh"\n'
              '#include "tilecraft/lowbit.cuh"\n'
              'extern "C" __global__ void casts(const unsigned* c, unsigned* o) {\n'
              + "\n".join(lines) + "\n}\n")
    res = compile_cuda(source, arch, name="casts").resources
    assert res.spill_stores == 0

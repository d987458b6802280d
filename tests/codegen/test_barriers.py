"""Barrier placement around shared memory in the generated CUDA (races the planner relies on
not existing): a shared write after a shared read gets a barrier on every path. The printed
instructions are commented `// <instruction>  (line N)`."""

import re

import tilecraft
import tilecraft.language as T
from tilecraft.codegen.cuda.build import generate_cuda


def _source(factory) -> str:
    return generate_cuda(factory().func, "sm_90a").source


def _barrier_before(text: str, marker: str) -> bool:
    """A __syncthreads() in `text` before `marker` (which must be there)."""
    at = text.find(marker)
    assert at >= 0, f"{marker!r} not in the generated code"
    return "__syncthreads();" in text[:at]


def _tile_write(text: str) -> str:
    """The comment of the first write of a shared tile from memory in `text`: a store of
    registers, or an asynchronous copy (a T.copy from global memory)."""
    found = [m for m in ("// store_shared(", "// copy_async(") if m in text]
    assert found, "no tile write in the generated code"
    return min(found, key=text.index)


def _after_block(text: str, opener: str) -> str:
    """`text` after the `{ ... }` block whose `{` ends the first line holding `opener`."""
    i = text.index("{", text.index(opener))
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[j + 1:]
    raise AssertionError(f"unbalanced braces after {opener!r}")


def _smem_offset(src: str, name: str) -> int:
    return int(re.search(rf"\b{name}_ = reinterpret_cast<.*>\(tc_smem \+ (\d+)\)", src)[1])


@tilecraft.jit
def reread_before_pipeline():
    @T.prim_func
    def k(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], s)
            T.copy(s, acc)  # reads s ...
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[ko * 64, 0], s)  # ... which the prologue's cp.async overwrites
                T.copy(s, acc)
            T.copy(acc, B[0, 0])

    return k


def test_a_loop_overwriting_what_was_read_before_it_waits_for_the_reads():
    src = _source(reread_before_pipeline)
    before_loop, loop = src.split("for (int ko_ = 0;")
    last_read = before_loop.rfind("// load_shared(s,")
    assert last_read >= 0
    first_write = re.search(r"// (store_shared\(\w+, s,|copy_async\w*\(s\b)", loop)
    assert first_write is not None
    assert "__syncthreads();" in before_loop[last_read:] + loop[:first_write.start()]


@tilecraft.jit
def read_before_pipeline_with_reused_bytes():
    @T.prim_func
    def k(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s0 = T.alloc_shared((64, 64), "float16")
            s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], s0)
            T.copy(s0, acc)  # the last read of s0, whose bytes the pipeline's setup reuses
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[ko * 64, 0], s)
                T.copy(s, acc)
            T.copy(acc, B[0, 0])

    return k


def test_pipeline_prologue_waits_for_earlier_reads_of_the_bytes_it_reuses():
    src = _source(read_before_pipeline_with_reused_bytes)
    # the TMA pipeline's mbarriers take the bytes of s0, dead after its last read
    assert _smem_offset(src, "s0") <= _smem_offset(src, "s_full") < _smem_offset(src, "s0") + 8192
    after_read = src[src.rindex("// load_shared(s0,"):]
    assert _barrier_before(after_read, "// mbarrier_init(s_full")


@tilecraft.jit
def branchy(flag):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((64,), "float32")
            f = T.alloc_fragment((64,), "float32")
            T.copy(A[0], s)
            T.copy(s, f)  # read of s since the last barrier
            if A[0] > flag:
                T.copy(f, s)  # a write with barriers around it: the then path is synced
            else:
                T.copy(B[0], s)  # write of s on the else path: needs its own barrier first
            T.copy(s, B[0])

    return k


def test_else_branch_write_after_read_gets_a_barrier():
    src = _source(lambda: branchy(0))
    then = src[src.index("if (A_[0] > 0.0f) {"):src.index("else {")]
    assert _barrier_before(then, "// store_shared(f, s,")
    other = src.split("else {")[1]
    assert _barrier_before(other, _tile_write(other))


@tilecraft.jit
def scalar_store_in_one_branch():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128,), "float32")
            if A[0] > 0:
                s[tx] = A[127 - tx]  # a scalar store: no barrier after it
            else:
                T.copy(A[0], s)  # a tile write, which ends with a barrier
            T.copy(s, f)  # reads what other threads stored on the then path
            T.copy(f, B[0])

    return k


def test_a_scalar_store_in_the_then_branch_is_synced_before_a_later_read():
    src = _source(scalar_store_in_one_branch)
    assert "s_[tx_1_] = " in src.split("else {")[0]  # the scalar store in the then branch
    after_if = _after_block(src, "else {")
    assert _barrier_before(after_if, "// load_shared(s,")


@tilecraft.jit
def scalar_store_then_break():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128,), "float32")
            for i in T.serial(4):
                s[tx] = A[127 - tx] + i
                if A[i] > 0:
                    break  # skips the barrier that ends the loop body
            T.copy(s, f)
            T.copy(f, B[0])

    return k


def test_a_scalar_store_before_a_break_is_synced_before_a_later_read():
    src = _source(scalar_store_then_break)
    after_loop = _after_block(src, "for (int i_ = 0;")
    assert "break;" in src.split(after_loop)[0]
    assert _barrier_before(after_loop, "// load_shared(s,")


@tilecraft.jit
def scalar_store_then_tile_write():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128,), "float32")
            s[tx] = 0.0
            T.copy(A[0], s)  # other threads overwrite s[tx]: the copy must win
            T.copy(s, f)
            T.copy(f, B[0])

    return k


def test_a_tile_write_after_a_scalar_store_waits_for_it():
    src = _source(scalar_store_then_tile_write)
    after = src.split("s_[tx_1_] = 0.0f;")[1]
    assert _barrier_before(after, _tile_write(after))

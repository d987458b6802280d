"""The catalog of user-facing diagnostics: one code, one message template, one hint.

Messages speak the user's words (buffers, tiles, lines), never the compiler's internals.
"""

from __future__ import annotations

from tilecraft._frozen import Frozen, _set


class Diagnostic(Frozen):
    """One catalog entry: its code, message template and hint template."""

    __slots__ = ("code", "title", "hint")
    code: str
    title: str
    hint: str

    def __init__(self, code: str, title: str, hint: str = "") -> None:
        _set(self, "code", code)
        _set(self, "title", title)
        _set(self, "hint", hint)


_ENTRIES = [
    # front end (TC1xx)
    Diagnostic("TC101", "unknown name `T.{name}` in the tile language",
               "see tilecraft.language for the names a kernel can use{suggest}"),
    Diagnostic("TC102", "T.Kernel has {grid} grid dimension(s) but `as` binds {bound} name(s)",
               "bind one name per grid dimension: `with T.Kernel(gx, gy, threads=128) as (bx, by):`"),
    Diagnostic("TC103", "Python construct `{construct}` is not supported inside a kernel",
               "{instead}"),
    Diagnostic("TC104", "name `{name}` is not defined", "define it before the kernel or inside it"),
    Diagnostic("TC105", "`{what}` can only be used inside a @T.prim_func kernel",
               "call it in the body of a function decorated with @T.prim_func"),
    Diagnostic("TC106", "cannot assign to `{name}`: it is a device value bound once",
               "use `x = T.alloc_var(dtype)` for a scalar you update, or a new name"),
    Diagnostic("TC107", "loop over `{what}` binds {bound} name(s) but it has {dims} dimension(s)",
               "bind one name per dimension: `for i, j in T.Parallel(M, N):`"),
    Diagnostic("TC108", "invalid argument: {detail}", "{hint}"),
    Diagnostic("TC109", "device value used where Python needs a constant: {detail}",
               "only Python constants can decide this at compile time{hint}"),
    Diagnostic("TC110", "tile operation outside of `with T.Kernel(...)`",
               "put tile operations inside the `with T.Kernel(...) as ...:` block"),
    Diagnostic("TC111", "`{func}` has no parameter `{keyword}`", "{suggest}{func} takes {params}"),
    Diagnostic("TC112", "wrong arguments to `{func}`: {detail}", "call it as {func}{signature}"),
    Diagnostic("TC113", "`{func}(..., {keyword}={value})` is a TileLang option tilecraft does not "
               "implement", "{hint}"),
    Diagnostic("TC114", "T.annotate_layout of `{buffer}` cannot be honoured: {detail}", "{hint}"),
    Diagnostic("TC115", "`{name}` holds {held} values{at}; it cannot take a {got} value here",
               "{hint}"),
    Diagnostic("TC116", "cannot update `{name}` here: {why}", "{hint}"),
    Diagnostic("TC117", "`{func}` cannot compute on device values or buffers", "{instead}"),
    Diagnostic("TC118", "integer constant {value} does not fit {dtype}, the type it takes here",
               "a Python integer takes the type of the device value it is combined with or "
               "stored to: convert that value to a wider type first (`T.cast(x, \"{wider}\")`), "
               "or write a constant in {dtype}'s range"),
    Diagnostic("TC119", "index `{index}` of `{buffer}` is a {dtype} value",
               "indices are integers: convert with `T.cast(..., \"int32\")` (it rounds toward "
               "zero) or compute the index with `//`"),
    Diagnostic("TC120", "assertion failed while building the kernel{msg}",
               "this `assert` reads only Python values, so it is checked when the kernel is "
               "built; an `assert` on device values becomes T.device_assert"),
    Diagnostic("TC121", "`{what}` inside T.Parallel: the body runs once per element, and "
               "`{name}` would be one buffer shared by every element",
               "allocate it before the T.Parallel loop (a fragment indexed by the loop variables "
               "holds one value per element), or bind a per-element value to a plain name "
               "(`v = A[i] * 2`)"),
    # shapes and types (TC2xx)
    Diagnostic("TC201", "slice of `{buffer}` is out of bounds: {detail}",
               "buffer `{buffer}` has shape {shape}"),
    Diagnostic("TC202", "T.gemm operands do not fit: {detail}",
               "A is [M, K] (or [K, M] with transpose_A), B is [K, N] (or [N, K] with "
               "transpose_B), C is [M, N]"),
    Diagnostic("TC203", "T.gemm dtypes do not fit: {detail}",
               "A and B share one input dtype (float16, bfloat16, ...); C accumulates in "
               "float32 or float16"),
    Diagnostic("TC204", "T.copy between incompatible shapes: {src} {src_shape} -> {dst} {dst_shape}",
               "after dropping size-1 dimensions both sides must have the same shape"),
    Diagnostic("TC205", "indexing `{buffer}` with {got} indices, but it has {rank} dimension(s)",
               "give one index (or slice) per dimension"),
    Diagnostic("TC206", "T.{op}: {detail}", "{hint}"),
    Diagnostic("TC207", "buffer `{buffer}` of scope `{scope}` cannot be used here: {detail}", "{hint}"),
    Diagnostic("TC208", "slice extent of `{buffer}` is not a compile-time constant: {detail}",
               "write slices as `A[i * b:(i + 1) * b]` so the extent is a constant"),
    Diagnostic("TC210", "unknown data type {what}", "{hint}"),
    Diagnostic("TC211", "{what} must be an integer, got {got}", "{hint}"),
    Diagnostic("TC212", "T.Kernel grid dimension {dim} is {value}: {detail}",
               "CUDA launches 1 <= x < 2^31 blocks along x and 1 <= y, z < 65536 along y and z"),
    # call time (TC3xx)
    Diagnostic("TC301", "kernel `{kernel}` takes {expected} argument(s), got {got}",
               "pass one tensor per parameter{out_hint}"),
    Diagnostic("TC302", "argument `{param}` has shape {got}, expected {expected}", "{hint}"),
    Diagnostic("TC303", "argument `{param}` has dtype {got}, expected {expected}",
               "convert it with `.to({torch_dtype})`"),
    Diagnostic("TC304", "argument `{param}` is on {got}, expected {expected}", "{hint}"),
    Diagnostic("TC305", "dynamic dimension `{dim}` is {first} in one argument and {second} in `{param}`",
               "all uses of one T.dynamic dimension must agree"),
    Diagnostic("TC306", "argument `{param}` is not contiguous", "pass `x.contiguous()`"),
    Diagnostic("TC307", "argument `{param}` cannot be read by TMA: {detail}",
               "the kernel loads it with the Tensor Memory Accelerator; pass a tensor whose data "
               "starts 16-byte aligned (`x.clone()`), or build with TILECRAFT_TMA=0"),
    Diagnostic("TC308", "argument `{param}` is not {align}-byte aligned (its address is {rem} "
               "mod {align}): the kernel reads or writes it with {align}-byte vector accesses",
               "pass a tensor whose data starts {align}-byte aligned, e.g. `{param}.clone()` (a "
               "view that starts inside another tensor, like `x[1:]`, is not)"),
    Diagnostic("TC309", "kernel `{kernel}` would launch {value} blocks along grid {axis}: "
               "{detail}", "{hint}"),
    Diagnostic("TC310", "kernel `{kernel}` has a block of {block} threads: {detail}",
               "CUDA runs 1 to 1024 threads per block (x, y <= 1024, z <= 64)"),
    Diagnostic("TC311", "scalar parameter `{param}` has dtype {dtype}, which a kernel argument "
               "cannot have", "declare it as one of {kinds} and cast it inside the kernel"),
    Diagnostic("TC315", "cannot make profiler inputs for `{kernel}`: {detail}", "{hint}"),
    Diagnostic("TC316", "cannot specialize `{kernel}` for this call: {detail}", "{hint}"),
    Diagnostic("TC317", "arguments `{first}` and `{second}` overlap in memory, and the kernel "
               "writes `{param}`: tilecraft kernels take distinct tensors for the tensors they "
               "write", "pass a copy of one of them (`x.clone()`), or a separate output"),
    Diagnostic("TC318", "argument `{param}` holds {got} bytes, but {dtype} of shape {shape} packs "
               "into {expected} bytes", "{hint}"),
    Diagnostic("TC319", "argument `{param}` has dtype {got}, but {dtype} tensors are passed as "
               "their packed bytes (a contiguous torch.uint8 or torch.int8 tensor, any shape)",
               "{hint}"),
    Diagnostic("TC320", "dynamic dimension `{dim}` of `{param}` is set by no other argument: "
               "{detail}", "{hint}"),
    Diagnostic("TC321", "tilecraft.{func}: {detail}", "{hint}"),
    Diagnostic("TC330", "no configuration fits: {detail}", "{hint}"),
    Diagnostic("TC331", "every autotune candidate of `{func}` failed ({count} tried); the "
               "first error: {first}", "{hint}"),
    # interpreter (TC4xx)
    Diagnostic("TC401", "index out of bounds in `{buffer}`: {detail}", "buffer shape is {shape}"),
    Diagnostic("TC402", "device assertion failed: {detail}", ""),
    Diagnostic("TC403", "not supported by the interpreter yet: {detail}", "{hint}"),
    Diagnostic("TC404", "{value} produced {where}: {detail}", "{hint}"),
    Diagnostic("TC410", "integer division by zero in `{expr}` {detail}",
               "on the GPU the result is undefined; guard the divisor (T.if_then_else or an if)"),
    Diagnostic("TC411", "cluster shared memory read out of order: {detail}", "{hint}"),
    # compiler (TC5xx)
    Diagnostic("TC501", "layout conflict on `{buffer}`: {detail}", "{hint}"),
    Diagnostic("TC502", "not supported by the CUDA backend yet: {detail}", "{hint}"),
    Diagnostic("TC503", "kernel needs {need} bytes of shared memory; {target} allows {limit}",
               "use smaller tiles or fewer pipeline stages"),
    Diagnostic("TC504", "{detail}", "{hint}"),
    # block-level programs (TC6xx)
    Diagnostic("TC601", "layout {layout} of `{tensor}` has shape {layout_shape}, but the tensor "
               "has shape {shape}", "give the tensor the layout's shape, or a layout of its shape"),
    Diagnostic("TC602", "layout {layout} of `{tensor}` spans {got} threads; the block has "
               "{threads}", "build the layout over the block's {threads} threads (e.g. "
               "`spatial(w, 1) * ...` for w warps, or `replicate(n) * ...`)"),
    Diagnostic("TC603", "invalid `{instr}`: {detail}",
               "docs/block_ir.md lists each instruction's operands and their rules"),
    Diagnostic("TC604", "cannot view `{tensor}` as {target}: {detail}",
               "a view keeps every thread's bits: the thread count and the bits per thread "
               "(local elements x dtype bits) must be equal"),
    Diagnostic("TC605", "`{tensor}` is {access} before the wait that lands it: a pending "
               "copy (line {line}) writes it", "wait for a copy_async with "
               "copy_async_commit_group() and copy_async_wait_group(n), for a copy_async_bulk "
               "with mbarrier_wait on its barrier, before touching its destination (with warp "
               "roles: release a stage only after its last reader is done)"),
    Diagnostic("TC606", "tensor `{tensor}` is used before it is allocated",
               "allocate it earlier, in the same block or an enclosing one"),
    Diagnostic("TC607", "replicas of `{tensor}` hold different values ({detail})",
               "threads that a replicated layout maps to one element must hold the same value; "
               "a view into a replicated layout breaks this"),
    Diagnostic("TC608", "not supported by the block VM yet: {detail}", ""),
    Diagnostic("TC609", "argument for `{param}` of `{program}`: {detail}",
               "pass one numpy array (or number) per parameter, of its shape and dtype"),
    Diagnostic("TC610", "`{tensor}`{index} is {access} in T.Parallel by thread {thread}, which "
               "does not hold it: `{tensor}` has layout {layout}, the loop {loop}",
               "a T.Parallel loop runs each element on the thread its layout gives; index a "
               "fragment there with the loop variables so that its layout agrees (layout "
               "inference does this), or copy it through shared memory"),
    Diagnostic("TC611", "`{tensor}` is {access} while an asynchronous dot_shared (line {line}) "
               "that {role} it is pending", "wait for it first with dot_wait_group(n), n small "
               "enough to complete that dot_shared"),
]

CATALOG: dict[str, Diagnostic] = {d.code: d for d in _ENTRIES}

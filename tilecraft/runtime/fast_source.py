"""The fast path's call written out as straight-line Python for one kernel's parameter list.

`call_source(plan, direct, block, smem, pointer_of)` returns the source of
`call(args, stream)` and the names it reads (the parameter block's slots, the launch's foreign
functions); fast_call.py adds the shared ones and compiles it. For a GEMM whose C is passed
(A and B have tensor maps, C needs 4-byte alignment) the call reads:

    def call(args, stream):
        try:
            t0, t1, t2 = args
            entry = entries.get((type(t0), t0.dtype, t0.shape, t0.is_contiguous(), t0.device,
                                 ..., t2.device))
        except Exception:  # a wrong count, not a tensor, or one without strides
            return MISS
        if entry is None:
            return MISS
        p0 = t0.data_ptr(); p1 = t1.data_ptr(); p2 = t2.data_ptr()
        if p2 % 4:
            return MISS
        function = entry.function
        ...                                    # an empty grid: maps encode? return
        if stream is None:
            stream = raw_stream(entry.device)
        s = streams.get(stream)                # the ctypes stream argument
        if s is None and stream:
            s = stream_arg(stream)
        acquire()
        try:
            s0.value = p0; s1.value = p1; s2.value = p2
            maps_key = (entry, p0, p1)
            if block.maps_key != maps_key: ... # put the maps of these addresses in the block
            if get_ctx(ctx_ref) or ctx.value != entry.primary:
                ensure_context(entry.device)
            gx, gy, gz = entry.grid
            err = cu_launch(function, gx, gy, gz, 128, 1, 1, 0, s, params, None)
        finally:
            release()
        if err:
            failed(err)
        return None

Each part is one line per parameter; nothing loops over parameters at call time. Where the
compiled launcher is built (native_launch.py), this call is its fallback and, after its launch,
primes it with the signature it launched (`native=True`: two lines inside the lock):

            err = cu_launch(...)
            if not err and nstate[0] != entry:       # (maps_key where there are tensor maps)
                prime(entry, (p0, p1, p2,), entry)
"""

from __future__ import annotations

from typing import Any

from .arg_plan import CallPlan, OutputSlot
from .launch import DirectLaunch


def signature_source(plan: CallPlan) -> str:
    """The expression of the signature tuple (fast_call.signature) over tensors named t0, t1,
    ... in plan order."""
    return ", ".join(f"type(t{k}), t{k}.dtype, t{k}.shape, "
                     f"t{k}.{'is_contiguous' if t.contiguous else 'stride'}(), t{k}.device"
                     for k, t in enumerate(plan.tensors)) + ","


def output_sizes(out: OutputSlot, shape: tuple[int, ...]) -> tuple:
    """The positional arguments of `empty` for output `out`, bound to `shape`, as the generated
    call passes them: `()` for a 0-d output, the packed byte count of a static packed one."""
    dims = out.param.shape
    if not dims:
        return ((),)
    if all(isinstance(d, int) for d in dims):
        return tuple(out.size({}))
    return tuple(shape)


def call_source(plan: CallPlan, direct: DirectLaunch, block: tuple[int, int, int], smem: int,
                pointer_of: dict[int, int], native: bool = False) -> tuple[str, dict[str, Any]]:
    """(source of `call`, the names it reads that are this kernel's own). `native`: the call is
    the compiled launcher's fallback (native_launch.py); after each launch it primes the
    launcher with the signature it launched unless that one is primed already (`nstate`,
    `prime`: fast_call.py's)."""
    slots = direct.block
    n = len(plan.tensors)
    names = [f"a{i}" for i in range(len(plan.caller_params))]
    for k, t in enumerate(plan.tensors):
        names[t.arg] = f"t{k}"
    tensors = [f"t{k}" for k in range(n)]
    outs = [f"o{k}" for k in range(len(plan.outputs))]
    pointers = [f"p{k}" for k in range(n + len(outs))]
    env: dict[str, Any] = {
        "acquire": direct.lock.acquire, "release": direct.lock.release, "block": slots,
        "get_ctx": direct.get_ctx, "ctx_ref": direct.ctx_ref, "ctx": direct.ctx,
        "cu_launch": direct.cu_launch, "params": direct.params, "streams": direct.streams,
        "stream_arg": direct.stream_arg, "failed": direct.failed,
    }
    sig = signature_source(plan)
    unpack = ", ".join(names) + ("," if len(names) == 1 else "")
    lines = [
        "def call(args, stream):",
        "    try:",
        f"        {unpack} = args",
        f"        entry = entries.get(({sig}))",
        "    except Exception:  # a wrong count, not a tensor, or one without strides",
        "        return MISS",
        "    if entry is None:",
        "        return MISS",
        *[f"    p{k} = {t}.data_ptr()" for k, t in enumerate(tensors)],
        *[f"    if p{k} % {t.align}:\n        return MISS"
          for k, t in enumerate(plan.tensors) if t.align],
    ]
    if plan.pairs:  # [p_i, p_i + e_i) and [p_j, p_j + e_j) must not intersect
        lines.append("    e = entry.ends")
        lines += [f"    if p{i} < p{j} + e[{j}] and p{j} < p{i} + e[{i}]:\n        return MISS"
                  for i, j in plan.pairs]
    writes = [f"        s{k}.value = {p}" for k, p in enumerate(pointers)]
    env.update({f"s{k}": slots.slot(t.slot) for k, t in enumerate(plan.tensors)})
    env.update({f"s{n + k}": slots.slot(o.slot) for k, o in enumerate(plan.outputs)})
    passed = [s for s in plan.scalars if s.arg is not None]
    if passed:
        lines.append("    try:")
        for k, s in enumerate(passed):
            lines.append(f"        v{k} = scalar_value({s.param.kind!r}, a{s.arg})")
            writes.append(f"        c{k}.value = v{k}")
            env[f"c{k}"] = slots.slot(s.slot)
        lines += ["    except BadScalar:", "        return MISS"]
    bound = [s for s in plan.scalars if s.arg is None]
    if bound:
        writes.append("        fixed = entry.fixed")
        for k, s in enumerate(bound):
            writes.append(f"        d{k}.value = fixed[{k}]")
            env[f"d{k}"] = slots.slot(s.slot)
    if outs:
        lines.append("    where = entry.where")
    for k, (o, out) in enumerate(zip(outs, plan.outputs)):
        env[f"dt{k}"] = out.dtype
        shape = out.param.shape
        if not shape:
            size = "()"
        elif all(isinstance(d, int) for d in shape):  # sizes one by one parse a third faster
            size = ", ".join(str(d) for d in out.size({}))  # packed: its bytes, 1-D
        else:
            size = f"*entry.shapes[{k}]"
        lines += [f"    {o} = empty({size}, dtype=dt{k}, device=where)",
                  f"    p{n + k} = {o}.data_ptr()"]
    listed = f"({', '.join(pointers)},)"
    result = (f"    return {outs[0] if len(outs) == 1 else '(' + ', '.join(outs) + ',)'}"
              if outs else "    return None")
    lines += ["    function = entry.function", "    if function is None:  # an empty grid"]
    if plan.maps:  # launches nothing, but a tensor whose map does not encode is refused
        lines += [f"        if not maps_encode(entry, {listed}):", "            return MISS"]
    lines.append("    " + result)
    if plan.maps:  # the maps' bytes are in the block already unless an address moved
        sources = sorted({pointer_of[m.tensor_slot] for m in plan.maps})
        key = ", ".join(["entry"] + [pointers[i] for i in sources])
        writes += [f"        maps_key = ({key})",
                   "        if block.maps_key != maps_key:",
                   f"            if not maps_held(entry, {listed}, block):",
                   "                return MISS",
                   "            block.maps_key = maps_key"]
    primes = []
    if native:  # the maps' addresses are part of what is primed (the block holds their maps)
        key = "maps_key" if plan.maps else "entry"
        primes = [f"        if not err and nstate[0] != {key}:",
                  f"            prime(entry, {listed}, {key})"]
    bx, by, bz = block
    lines += [
        "    if stream is None:",
        "        stream = raw_stream(entry.device)",
        "    s = streams.get(stream)",
        "    if s is None and stream:",
        "        s = stream_arg(stream)",
        "    acquire()",
        "    try:",
        *writes,
        "        if get_ctx(ctx_ref) or ctx.value != entry.primary:",
        "            ensure_context(entry.device)",
        "        gx, gy, gz = entry.grid",
        f"        err = cu_launch(function, gx, gy, gz, {bx}, {by}, {bz}, {smem}, s, params, None)",
        *primes,
        "    finally:",
        "        release()",
        "    if err:",
        "        failed(err)",
        result,
    ]
    return "\n".join(lines) + "\n", env

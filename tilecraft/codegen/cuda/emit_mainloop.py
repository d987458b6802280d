"""The GEMM mainloop: a pipelined loop whose only consumer is one `T.gemm` on shared tiles.

The generic pipeline (emit_pipeline.py) puts a barrier at the top of every iteration, so each
iteration starts by waiting for its first ldmatrix. Here the operand fragments are double
buffered in registers and the loads run one k16 step ahead, across the iteration boundary too
(the CUTLASS multistage mainloop):

    wait stage 0; barrier; load fragments of k16 step 0
    for k in 0 .. n-1:
        for kk in 0 .. K16-1:                      (unrolled)
            if kk == K16-1: wait stage k+1; barrier; read stage <- k+1
            load fragments of step kk+1 (of stage k+1 when kk == K16-1) into buffer (kk+1) % 2
            copies of iteration k+S-1 due at step kk (spread over steps 0 .. K16-2; the
                last ones commit the group) into the stage read at k-1
            mma.sync on buffer kk % 2
The copies overwrite the stage iteration k-1 read; its last fragments were loaded before the
barrier at the end of iteration k-1, so no warp still reads it.
"""

from __future__ import annotations

from tilecraft.ir import Gemm

from .emit_gemm import MMA, a_rc, b2_rc, gemm_shape, load_a, load_b2, warp_origin


def _c_eval(expr: str, env: dict) -> int:
    # index expressions print only + * / % << >> ^ & on non-negative ints: C `/` floors
    return eval(expr.replace("/", "//"), {"__builtins__": {}}, env)  # noqa: S307


def offset_plan(em, g: Gemm, buf, rc, steps: list[tuple[int, int]]) -> dict | None:
    """Write the per-thread element offsets of the ldmatrix rows of each (atom, kk) in `steps`
    as (base ^ X) + Y with one per-thread `base`, where one of atom and kk moves the offset by
    a constant XOR (it flips swizzled chunk bits) and the other by a constant add (it moves by
    whole swizzle periods): one register serves every load, as in CUTLASS's swizzled
    iterators. Checked by evaluating the printed offsets for every thread; None when no
    decomposition holds."""
    m, n, _, wm, wn, _, _ = gemm_shape(em, g)
    threads = [{"lane": t % 32, "warp_m": (t // 32) // wn * (m // wm),
                "warp_n": (t // 32) % wn * (n // wn)} for t in range(wm * wn * 32)]
    expr = {st: em.flat_index(buf, list(rc(*st))) for st in steps}
    table = {st: [_c_eval(e, env) for env in threads] for st, e in expr.items()}
    a0, k0 = steps[0]
    base = table[(a0, k0)]

    def const(values: set) -> int | None:
        return values.pop() if len(values) == 1 else None

    for xor_axis in (1, 0):  # which of (atom, kk) flips bits; the other adds
        x, y = {}, {}
        for st in steps:
            xs = (a0, st[1]) if xor_axis else (st[0], k0)
            ys = (st[0], k0) if xor_axis else (a0, st[1])
            x[st[xor_axis]] = const({t ^ b for t, b in zip(table[xs], base)})
            y[st[1 - xor_axis]] = const({t - b for t, b in zip(table[ys], base)})
        if None in x.values() or None in y.values():
            continue
        if all(table[st] == [(b ^ x[st[xor_axis]]) + y[st[1 - xor_axis]] for b in base]
               for st in steps):
            return {"base": expr[(a0, k0)], "xor_axis": xor_axis, "x": x, "y": y}
    return None


def lone_gemm(em, consumers: list, plan) -> Gemm | None:
    """The gemm when it is the loop's only consumer and the fused mainloop applies."""
    if len(consumers) != 1 or not isinstance(consumers[0], Gemm):
        return None
    g = consumers[0]
    if (g.clear_accum or g.A.buffer.scope != "shared" or g.B.buffer.scope != "shared"
            or g.A.dtype.name not in MMA or plan.num_stages < 2):
        return None
    _, _, k, _, _, _, tn = gemm_shape(em, g)
    if (k // 16) % 2 or tn % 2 or g.B.buffer not in plan.buffers:
        return None
    return g


def emit_gemm_mainloop(em, loop, plan, g: Gemm, producers, read_ptr) -> None:
    S = plan.num_stages
    _, _, k, wm, wn, tm, tn = gemm_shape(em, g)
    k16 = k // 16
    em.comment(g, f"T.gemm {g.A.buffer.name} x {g.B.buffer.name} -> {g.C.buffer.name}: "
               f"{tm}x{tn} mma.m16n8k16 per warp, warps {wm}x{wn}, fragments one k16 step "
               "ahead")
    warp_origin(em, g)
    em.w(f"tc::u32 a_frag[2][{tm}][4], b_frag[2][{tn}][2];")
    kks = range(k16)
    plans = {}
    for name, buf, rc, atoms in (("a", g.A.buffer, lambda i, k: a_rc(g, i, k), range(tm)),
                                 ("b", g.B.buffer, lambda j, k: b2_rc(g, j, k),
                                  range(0, tn, 2))):
        plan_ = offset_plan(em, g, buf, rc, [(a, k) for a in atoms for k in kks])
        if plan_ is not None:
            plans[name] = plan_
            em.w(f"const tc::u32 {name}_off = {plan_['base']};  // elements; every ldmatrix row "
                 "of this thread is (off ^ X) + Y")
            em.w(f"const tc::u32 {name}_smem = tc::smem_addr({em.shared_ptr[buf]});")

    def planned(name: str, buf, fn: str, dst: str, atom: int, kk: int) -> None:
        p = plans[name]
        st = (atom, kk)
        x, y = p["x"][st[p["xor_axis"]]], p["y"][st[1 - p["xor_axis"]]]
        off = f"{name}_off" if not x else f"({name}_off ^ {x}u)"
        off = off if not y else f"({off} + {y}u)"
        stage = (f" + stage_r * {em.state.shared[buf].nbytes}u" if buf in plan.buffers else "")
        em.w(f"{fn}({dst}, {name}_smem{stage} + {off} * {buf.dtype.bits // 8}u);")

    def load(buf: int, kk: int) -> None:
        read_ptr()
        if "a" in plans:
            fn = "tc::ldmatrix_x4_trans" if g.transpose_A else "tc::ldmatrix_x4"
            for im in range(tm):
                planned("a", g.A.buffer, fn, f"a_frag[{buf}][{im}]", im, kk)
        else:
            em.w("#pragma unroll")
            em.w(f"for (int im = 0; im < {tm}; ++im)")
            em.indent += 1
            load_a(em, g, f"a_frag[{buf}][im]", "im", str(kk))
            em.indent -= 1
        if "b" in plans:
            fn = "tc::ldmatrix_x4" if g.transpose_B else "tc::ldmatrix_x4_trans"
            for jn in range(0, tn, 2):
                planned("b", g.B.buffer, fn, f"&b_frag[{buf}][{jn}][0]", jn, kk)
        else:
            em.w("#pragma unroll")
            em.w(f"for (int jn = 0; jn < {tn}; jn += 2)")
            em.indent += 1
            load_b2(em, g, f"&b_frag[{buf}][jn][0]", "jn", str(kk))
            em.indent -= 1

    # the copies of one iteration are spread over its first k16 steps (fewer memory
    # instructions back to back); all are committed before the wait at step k16 - 1
    n = len(plan.producers)
    slot = [i * (k16 - 1) // n for i in range(n)]
    em.w(f"tc::cp_async_wait<{S - 2}>();")
    em.sync()
    em.w(f"int stage_r = 0, stage_w = {S - 1};  // stages read and refilled by iteration k_iter")
    load(0, 0)
    em.open("for (int k_iter = 0; k_iter < n_iters; ++k_iter)")
    for kk in range(k16):
        em.w(f"// k16 step {kk}")
        if kk == k16 - 1:
            em.w(f"tc::cp_async_wait<{S - 2}>();")
            em.sync()
            em.w(f"stage_r = stage_r == {S - 1} ? 0 : stage_r + 1;")
        load((kk + 1) % 2, (kk + 1) % k16)
        mine = [p for i, p in enumerate(plan.producers) if slot[i] == kk]
        if mine:
            last = kk == slot[-1]
            em.open("")
            em.w(f"const int pre = k_iter + {S - 1};")
            producers("pre", "stage_w", mine, commit=last)
            if last:
                em.w(f"stage_w = stage_w == {S - 1} ? 0 : stage_w + 1;")
            em.close()
        em.w("#pragma unroll")
        em.open(f"for (int im = 0; im < {tm}; ++im)")
        em.w("#pragma unroll")
        em.open(f"for (int jn = 0; jn < {tn}; ++jn)")
        em.w(f"float* acc = &{g.C.buffer.name}[(im * {tn} + jn) * 4];")
        em.w(f"{MMA[g.A.dtype.name]}(acc, a_frag[{kk % 2}][im], b_frag[{kk % 2}][jn], acc);")
        em.close()
        em.close()
    em.close()

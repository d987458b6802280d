"""T.gemm -> mma.sync.m16n8k16 (fp16/bf16 in, fp32 accumulate), operands by ldmatrix.

Warp w computes the (w // wn, w % wn) block of C, tm x tn atoms (see rules_gemm.py). For each
16-wide K step: A atoms by ldmatrix.x4 (.trans when A is stored K-major, i.e. transpose_A),
B atoms two n8 tiles per ldmatrix.x4 (.trans for B stored [K][N]; plain for transpose_B), or
A straight from registers when A is a fragment in the mma A layout. Register index of C atom
(im, jn) element e: (im * tn + jn) * 4 + e.
"""

from __future__ import annotations

import functools

from tilecraft.ir import Gemm

from .regions import region_index

MMA = {"float16": "tc::mma_m16n8k16_f16_f32", "bfloat16": "tc::mma_m16n8k16_bf16_f32"}


def _index(em, region, r: str, c: str) -> str:
    """Flat element index of (r, c) of the tile `region` (a slice of its buffer, possibly at an
    offset or inside a buffer with more dimensions)."""
    return em.flat_index(region.buffer, region_index(em, region, [r, c]))


def _addr(em, region, r: str, c: str) -> str:
    return f"&{em.shared_ptr[region.buffer]}[{_index(em, region, r, c)}]"


def gemm_shape(em, op: Gemm) -> tuple[int, int, int, int, int, int, int]:
    """(m, n, k, warps along m, warps along n, m16 atoms per warp, n8 atoms per warp)."""
    m, n, k = op.mnk()
    wm, wn = em.state.gemm_warps[id(op)]
    return m, n, k, wm, wn, m // (16 * wm), n // (8 * wn)


def warp_origin(em, op: Gemm) -> None:
    """Declare lane, warp_m, warp_n: this warp's corner in C."""
    m, n, _, wm, wn, _, _ = gemm_shape(em, op)
    copies = em.state.gemm_copies.get(id(op), 1)
    warp = "(tid / 32)" if copies == 1 else f"((tid / 32) % {wm * wn})"  # copies: same tile
    em.w(f"const int warp_m = {warp} / {wn} * {m // wm}, warp_n = {warp} % {wn} * "
         f"{n // wn};")
    em.w("const int lane = tid % 32;")


def a_rc(op: Gemm, im, kk) -> tuple[str, str]:
    """Row and column (in A's shared tile) of this lane's ldmatrix.x4 row for A atom (im, kk)."""
    if not op.transpose_A:
        return f"warp_m + {im} * 16 + lane % 16", f"{kk} * 16 + lane / 16 * 8"
    return f"{kk} * 16 + lane % 8 + lane / 16 * 8", f"warp_m + {im} * 16 + (lane / 8) % 2 * 8"


def b2_rc(op: Gemm, jn, kk) -> tuple[str, str]:
    """Row and column (in B's shared tile) of this lane's ldmatrix.x4 row for B atoms jn, jn+1."""
    if not op.transpose_B:
        return f"{kk} * 16 + lane % 8 + (lane / 8) % 2 * 8", f"warp_n + {jn} * 8 + lane / 16 * 8"
    return f"warp_n + {jn} * 8 + lane % 8 + lane / 16 * 8", f"{kk} * 16 + (lane / 8) % 2 * 8"


def load_a(em, op: Gemm, dst: str, im: str, kk: str) -> None:
    """ldmatrix.x4 of the A atom (im, kk) into u32[4] `dst`."""
    fn = "tc::ldmatrix_x4_trans" if op.transpose_A else "tc::ldmatrix_x4"
    em.w(f"{fn}({dst}, {_addr(em, op.A, *a_rc(op, im, kk))});")


def load_b2(em, op: Gemm, dst: str, jn: str, kk: str) -> None:
    """ldmatrix.x4 of the B atoms (jn, kk) and (jn + 1, kk) into u32[2][2] at `dst`."""
    fn = "tc::ldmatrix_x4" if op.transpose_B else "tc::ldmatrix_x4_trans"
    em.w(f"{fn}({dst}, {_addr(em, op.B, *b2_rc(op, jn, kk))});")


def load_b1(em, op: Gemm, dst: str, jn: int, kk: str) -> None:
    """ldmatrix.x2 of the B atom (jn, kk) into u32[2] `dst`."""
    B = op.B
    if not op.transpose_B:
        em.w(f"tc::ldmatrix_x2_trans({dst}, {_addr(em, B, f'{kk} * 16 + lane % 8 + (lane / 8) % 2 * 8', f'warp_n + {jn * 8}')});")
    else:
        em.w(f"tc::ldmatrix_x2({dst}, {_addr(em, B, f'warp_n + {jn * 8} + lane % 8', f'{kk} * 16 + (lane / 8) % 2 * 8')});")


@functools.lru_cache(maxsize=4096)
def _c_code(expr: str):
    # index expressions print only + * / % << >> ^ & on non-negative ints: C `/` floors
    return compile(expr.replace("(long long)", "").replace("/", "//"), "<index>", "eval")


def _c_eval(expr: str, env: dict) -> int:
    """Value of a printed C index expression for the variable values in `env`."""
    return eval(_c_code(expr), {"__builtins__": {}}, env)


def offset_plan(em, g: Gemm, region, rc, steps: list[tuple[int, int]]) -> dict | None:
    """Write the per-thread element offsets of the ldmatrix rows of each (atom, kk) in `steps`
    as (base ^ X) + Y with one per-thread `base`, where one of atom and kk moves the offset by
    a constant XOR (it flips swizzled chunk bits) and the other by a constant add (it moves by
    whole swizzle periods): one register serves every load, as in CUTLASS's swizzled
    iterators. Checked by evaluating the printed offsets for every thread; None when no
    decomposition holds."""
    m, n, _, wm, wn, _, _ = gemm_shape(em, g)
    threads = [{"lane": t % 32, "warp_m": (t // 32) // wn * (m // wm),
                "warp_n": (t // 32) % wn * (n // wn)} for t in range(wm * wn * 32)]
    expr = {st: _index(em, region, *rc(*st)) for st in steps}
    try:
        table = {st: [_c_eval(e, env) for env in threads] for st, e in expr.items()}
    except Exception:  # noqa: BLE001  (a name or form the evaluator cannot follow)
        return None
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


def planned_load(em, plan: dict, name: str, buf, fn: str, dst: str, atom: int, kk: int,
                 stage: str = "") -> None:
    """One ldmatrix at `{name}_smem + stage + ((off ^ X) + Y) * bytes` (see offset_plan)."""
    st = (atom, kk)
    x, y = plan["x"][st[plan["xor_axis"]]], plan["y"][st[1 - plan["xor_axis"]]]
    off = f"{name}_off" if not x else f"({name}_off ^ {x}u)"
    off = off if not y else f"({off} + {y}u)"
    em.w(f"{fn}({dst}, {name}_smem{stage} + {off} * {buf.dtype.bits // 8}u);")


def load_a_atom(em, op: Gemm, plans: dict, dst: str, im: int, kk: int, stage: str = "") -> None:
    """The A atom (im, kk) into u32[4] `dst`: planned address when there is a plan."""
    if "a" not in plans:
        return load_a(em, op, dst, str(im), str(kk))
    fn = "tc::ldmatrix_x4_trans" if op.transpose_A else "tc::ldmatrix_x4"
    planned_load(em, plans["a"], "a", op.A.buffer, fn, dst, im, kk, stage)


def load_b_pair(em, op: Gemm, plans: dict, dst: str, jn: int, kk: int, stage: str = "") -> None:
    """The B atoms (jn, kk), (jn + 1, kk) into u32[2][2] at `dst`: planned when possible."""
    if "b" not in plans:
        return load_b2(em, op, dst, str(jn), str(kk))
    fn = "tc::ldmatrix_x4" if op.transpose_B else "tc::ldmatrix_x4_trans"
    planned_load(em, plans["b"], "b", op.B.buffer, fn, dst, jn, kk, stage)


def operand_plans(em, op: Gemm, kks, smem_of) -> dict:
    """offset_plan for A and B when they are in shared memory, with their declarations."""
    _, _, _, _, _, tm, tn = gemm_shape(em, op)
    plans = {}
    for name, reg, rc, atoms in (("a", op.A, lambda i, k: a_rc(op, i, k), range(tm)),
                                 ("b", op.B, lambda j, k: b2_rc(op, j, k), range(0, tn - 1, 2))):
        if reg.buffer.scope != "shared" or not atoms:
            continue
        p = offset_plan(em, op, reg, rc, [(a, k) for a in atoms for k in kks])
        if p is not None:
            plans[name] = p
            em.w(f"const tc::u32 {name}_off = {p['base']};  // elements; every ldmatrix row of "
                 "this thread is (off ^ X) + Y")
            em.w(f"const tc::u32 {name}_smem = tc::smem_addr({smem_of(reg.buffer)});")
    return plans


def emit_gemm(em, op: Gemm) -> None:
    if id(op) in em.state.gemm_wgmma:
        from .emit_wgmma import emit_wgmma

        return emit_wgmma(em, op)
    m, n, k, wm, wn, tm, tn = gemm_shape(em, op)
    A, B, C = op.A.buffer, op.B.buffer, op.C.buffer
    em.comment(op, f"T.gemm {A.name} x {B.name}{'^T' if op.transpose_B else ''} -> {C.name}: "
               f"{m}x{n}x{k}, warps {wm}x{wn}, {tm}x{tn} mma.m16n8k16 per warp per k16")
    if op.clear_accum:
        em.w("#pragma unroll")
        em.w(f"for (int li = 0; li < {tm * tn * 4}; ++li) {em.name_buf(C)}[li] = 0.f;")
    em.open("")
    warp_origin(em, op)
    plans = operand_plans(em, op, range(k // 16), lambda b: em.shared_ptr[b])
    if plans:
        _unrolled_k16_steps(em, op, plans)
        em.close()
        return
    em.w("#pragma unroll")
    em.open(f"for (int kk = 0; kk < {k // 16}; ++kk)")
    em.w(f"tc::u32 a_frag[{tm}][4];")
    if A.scope == "fragment":
        tk = k // 16
        em.w("#pragma unroll")
        em.open(f"for (int im = 0; im < {tm}; ++im)")
        em.w("#pragma unroll")
        em.open("for (int r = 0; r < 4; ++r)")
        em.w(f"const int base = (im * {tk} + kk) * 8 + 2 * r;")
        em.w(f"a_frag[im][r] = tc::pack2({em.name_buf(A)}[base], {em.name_buf(A)}[base + 1]);")
        em.close()
        em.close()
    else:
        em.w("#pragma unroll")
        em.open(f"for (int im = 0; im < {tm}; ++im)")
        load_a(em, op, "a_frag[im]", "im", "kk")
        em.close()
    pairs, odd = divmod(tn, 2)
    # B two n8 tiles at a time, used right away (short live ranges: fewer registers)
    for j0, width in [(None, 2)] * bool(pairs) + [(tn - 1, 1)] * odd:
        if j0 is None:
            em.w("#pragma unroll")
            em.open(f"for (int jn = 0; jn < {2 * pairs}; jn += 2)")
            jn = "jn"
            em.w("tc::u32 b_frag[2][2];")
            load_b2(em, op, "&b_frag[0][0]", "jn", "kk")
        else:
            em.open("")
            jn = str(j0)
            em.w("tc::u32 b_frag[1][2];")
            load_b1(em, op, "b_frag[0]", j0, "kk")
        em.w("#pragma unroll")
        em.open(f"for (int im = 0; im < {tm}; ++im)")
        for w in range(width):
            acc = f"&{em.name_buf(C)}[(im * {tn} + {jn} + {w}) * 4]"  # no local: C may be named acc0
            em.w(f"{MMA[A.dtype.name]}({acc}, a_frag[im], b_frag[{w}], {acc});")
        em.close()
        em.close()
    em.close()
    em.close()


def _unrolled_k16_steps(em, op: Gemm, plans: dict) -> None:
    """The k16 steps written out, loads at (off ^ X) + Y (B two n8 atoms at a time, used
    right away: short live ranges)."""
    _, _, k, _, _, tm, tn = gemm_shape(em, op)
    A, C, mma = op.A.buffer, op.C.buffer, MMA[op.A.dtype.name]
    for kk in range(k // 16):
        em.w(f"// k16 step {kk}")
        em.open("")
        em.w(f"tc::u32 a_frag[{tm}][4];")
        for im in range(tm):
            if A.scope == "fragment":
                base = (im * (k // 16) + kk) * 8
                em.w("#pragma unroll")
                em.w(f"for (int r = 0; r < 4; ++r) a_frag[{im}][r] = tc::pack2({em.name_buf(A)}[{base} "
                     f"+ 2 * r], {em.name_buf(A)}[{base} + 2 * r + 1]);")
            else:
                load_a_atom(em, op, plans, f"a_frag[{im}]", im, kk)
        for jn in range(0, tn, 2):
            em.open("")
            width = min(2, tn - jn)
            em.w(f"tc::u32 b_frag[{width}][2];")
            if width == 1:
                load_b1(em, op, "b_frag[0]", jn, str(kk))
            else:
                load_b_pair(em, op, plans, "&b_frag[0][0]", jn, kk)
            em.w("#pragma unroll")
            em.open(f"for (int im = 0; im < {tm}; ++im)")
            for w in range(width):
                acc = f"&{em.name_buf(C)}[(im * {tn} + {jn + w}) * 4]"
                em.w(f"{mma}({acc}, a_frag[im], b_frag[{w}], {acc});")
            em.close()
            em.close()
        em.close()

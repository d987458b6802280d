"""T.gemm -> mma.sync.m16n8k16 (fp16/bf16 in, fp32 accumulate), operands by ldmatrix.

Warp w computes the (w // wn, w % wn) block of C, tm x tn atoms (see rules_gemm.py). For each
16-wide K step: A atoms by ldmatrix.x4 (.trans when A is stored K-major, i.e. transpose_A),
B atoms two n8 tiles per ldmatrix.x4 (.trans for B stored [K][N]; plain for transpose_B), or
A straight from registers when A is a fragment in the mma A layout. Register index of C atom
(im, jn) element e: (im * tn + jn) * 4 + e.
"""

from __future__ import annotations

from tilecraft.ir import Gemm

MMA = {"float16": "tc::mma_m16n8k16_f16_f32", "bfloat16": "tc::mma_m16n8k16_bf16_f32"}


def _addr(em, buf, r: str, c: str) -> str:
    return f"&{em.shared_ptr[buf]}[{em.flat_index(buf, [r, c])}]"


def gemm_shape(em, op: Gemm) -> tuple[int, int, int, int, int, int, int]:
    """(m, n, k, warps along m, warps along n, m16 atoms per warp, n8 atoms per warp)."""
    m, n, k = op.mnk()
    wm, wn = em.state.gemm_warps[id(op)]
    return m, n, k, wm, wn, m // (16 * wm), n // (8 * wn)


def warp_origin(em, op: Gemm) -> None:
    """Declare lane, warp_m, warp_n: this warp's corner in C."""
    m, n, _, wm, wn, _, _ = gemm_shape(em, op)
    em.w(f"const int warp_m = (tid / 32) / {wn} * {m // wm}, warp_n = (tid / 32) % {wn} * "
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
    em.w(f"{fn}({dst}, {_addr(em, op.A.buffer, *a_rc(op, im, kk))});")


def load_b2(em, op: Gemm, dst: str, jn: str, kk: str) -> None:
    """ldmatrix.x4 of the B atoms (jn, kk) and (jn + 1, kk) into u32[2][2] at `dst`."""
    fn = "tc::ldmatrix_x4" if op.transpose_B else "tc::ldmatrix_x4_trans"
    em.w(f"{fn}({dst}, {_addr(em, op.B.buffer, *b2_rc(op, jn, kk))});")


def load_b1(em, op: Gemm, dst: str, jn: int, kk: str) -> None:
    """ldmatrix.x2 of the B atom (jn, kk) into u32[2] `dst`."""
    B = op.B.buffer
    if not op.transpose_B:
        em.w(f"tc::ldmatrix_x2_trans({dst}, {_addr(em, B, f'{kk} * 16 + lane % 8 + (lane / 8) % 2 * 8', f'warp_n + {jn * 8}')});")
    else:
        em.w(f"tc::ldmatrix_x2({dst}, {_addr(em, B, f'warp_n + {jn * 8} + lane % 8', f'{kk} * 16 + (lane / 8) % 2 * 8')});")


def emit_gemm(em, op: Gemm) -> None:
    m, n, k, wm, wn, tm, tn = gemm_shape(em, op)
    A, B, C = op.A.buffer, op.B.buffer, op.C.buffer
    em.comment(op, f"T.gemm {A.name} x {B.name}{'^T' if op.transpose_B else ''} -> {C.name}: "
               f"{m}x{n}x{k}, warps {wm}x{wn}, {tm}x{tn} mma.m16n8k16 per warp per k16")
    if op.clear_accum:
        em.w("#pragma unroll")
        em.w(f"for (int li = 0; li < {tm * tn * 4}; ++li) {C.name}[li] = 0.f;")
    em.open("")
    warp_origin(em, op)
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
        em.w(f"a_frag[im][r] = tc::pack2({A.name}[base], {A.name}[base + 1]);")
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
            em.w(f"float* acc{w} = &{C.name}[(im * {tn} + {jn} + {w}) * 4];")
            em.w(f"{MMA[A.dtype.name]}(acc{w}, a_frag[im], b_frag[{w}], acc{w});")
        em.close()
        em.close()
    em.close()
    em.close()

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

from .emit_gemm import MMA, gemm_shape, load_a_atom, load_b_pair, operand_plans, warp_origin


def lone_gemm(em, consumers: list, plan) -> Gemm | None:
    """The gemm when it is the loop's only consumer and the fused mainloop applies."""
    if len(consumers) != 1 or not isinstance(consumers[0], Gemm):
        return None
    g = consumers[0]
    if id(g) in em.state.gemm_wgmma:
        return None
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
    plans = operand_plans(em, g, range(k16), lambda b: em.shared_ptr[b])

    def stage(buf) -> str:
        return f" + stage_r * {em.state.shared[buf].nbytes}u" if buf in plan.buffers else ""

    def load(buf: int, kk: int) -> None:
        """The fragments of k16 step kk into register buffer `buf`."""
        read_ptr()
        for im in range(tm):
            load_a_atom(em, g, plans, f"a_frag[{buf}][{im}]", im, kk, stage(g.A.buffer))
        for jn in range(0, tn, 2):
            load_b_pair(em, g, plans, f"&b_frag[{buf}][{jn}][0]", jn, kk, stage(g.B.buffer))

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
        acc = f"&{em.name_buf(g.C.buffer)}[(im * {tn} + jn) * 4]"  # no local: C may be named acc
        em.w(f"{MMA[g.A.dtype.name]}({acc}, a_frag[{kk % 2}][im], b_frag[{kk % 2}][jn], {acc});")
        em.close()
        em.close()
    em.close()

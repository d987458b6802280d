"""T.gemm -> wgmma.mma_async (sm_90a): operands read from shared memory by descriptor, or A
from registers (a fragment in the mma.sync A layout, one 64-row tile per warpgroup).

The warpgroups split C gm x gn (rules_gemm.wgmma_plan); warpgroup (g_m, g_n) issues, per k16
step, one m64nNk16 per 64-row tile t of its rows (N = n / gn) into the registers of C atom row
t: C[(t * tn + j) * 4 + e], the mma.sync register order. Descriptors come from
tilecraft.layout.wgmma (checked element by element against the tile's swizzled layout); each
(t, kk) slab is the warpgroup's descriptor plus a constant.

    fence the accumulator registers; wgmma.fence
    for kk, t: wgmma(C atom row t, desc_A + start_A(t, kk), desc_B + start_B(kk))
    commit; wait until done; fence the accumulator registers

The wait leaves no wgmma running past the gemm, so the barriers placed for shared memory keep
their meaning (a pipelined loop refills a stage only after every warpgroup finished with it).
"""

from __future__ import annotations

from tilecraft.ir import Gemm
from tilecraft.passes.layout_inference.rules_gemm import wgmma_descriptors

PTX_TYPE = {"float16": "f16", "bfloat16": "bf16"}


def wgmma_helper(em, n: int, dtype: str, trans_b: int, trans_a: int | None = None) -> str:
    """Name of the device function issuing one m64n{n}k16 (written into the source once): A by
    descriptor with `trans_a`, or from four registers when `trans_a` is None."""
    t = PTX_TYPE[dtype]
    regs = n // 2  # operands: d[0..regs), then A (a descriptor, or 4 registers), B, the scale
    if trans_a is None:
        name, a_param, a_in = f"tc_wgmma_m64n{n}k16_{t}_rs_t{trans_b}", "const tc::u32* a", 4
        a_op, flags = "{" + ", ".join(f"%{regs + i}" for i in range(4)) + "}", f"{trans_b}"
        inputs = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])'
    else:
        name, a_param, a_in = f"tc_wgmma_m64n{n}k16_{t}_t{trans_a}{trans_b}", "tc::u64 a", 1
        a_op, flags, inputs = f"%{regs}", f"{trans_a}, {trans_b}", '"l"(a)'
    if name not in em.helpers:
        d = ", ".join(f"%{i}" for i in range(regs))
        outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
        em.helpers[name] = (
            f"__device__ __forceinline__ void {name}(float* d, {a_param}, tc::u64 b) {{\n"
            f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + a_in + 1}, 0;\\n"\n'
            f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{d}}}, {a_op}, '
            f'%{regs + a_in}, p, 1, 1, {flags};\\n}}\\n"\n'
            f"      : {outs}\n"
            f'      : {inputs}, "l"(b), "n"(1));\n'
            "}\n")
    return name


def _fence_acc(em, acc: str, count: int) -> None:
    em.w("#pragma unroll")
    em.w(f"for (int li = 0; li < {count}; ++li) tc::wgmma_fence_operand({acc}[li]);")


def emit_wgmma(em, op: Gemm) -> None:
    em.open("")
    issue_wgmma(em, op)
    em.w("tc::wgmma_wait<0>();")
    _fence_acc(em, em.name_buf(op.C.buffer), _acc_count(em, op))
    em.close()


def _acc_count(em, op: Gemm) -> int:
    m, n, _ = op.mnk()
    return m * n // em.state.num_threads


def issue_wgmma(em, op: Gemm) -> None:
    """Descriptors, fences and the wgmma of every k16 step, committed as one group (not
    waited for)."""
    m, n, k = op.mnk()
    gm, gn = em.state.gemm_wgmma[id(op)]
    descs = wgmma_descriptors(op, gm, gn)
    tm, nw = m // (64 * gm), n // gn
    tn = nw // 8
    A, B, C = op.A.buffer, op.B.buffer, op.C.buffer
    a_regs = A.scope == "fragment"
    em.comment(op, f"T.gemm {A.name}{'^T' if op.transpose_A else ''} x {B.name}"
               f"{'^T' if op.transpose_B else ''} -> {C.name}: {m}x{n}x{k}, warpgroups {gm}x{gn}, "
               f"{tm} wgmma.m64n{nw}k16 per warpgroup per k16 (A from "
               f"{'registers' if a_regs else 'shared memory'}, B from shared memory)")
    if op.clear_accum:
        em.w("#pragma unroll")
        em.w(f"for (int li = 0; li < {tm * tn * 4}; ++li) {em.name_buf(C)}[li] = 0.f;")
    trans_b = int(1 - op.transpose_B)
    fn = wgmma_helper(em, nw, A.dtype.name, trans_b, None if a_regs else int(op.transpose_A))
    da0, db0 = descs[0]
    step = {}
    for name, axis, pick in (("a", gm, 0), ("b", gn, 1)):
        first = descs[0][pick]
        other = descs[gn if pick == 0 else 1][pick] if axis > 1 else first
        step[name] = 0 if first is None else other.starts[(0, 0)] - first.starts[(0, 0)]
    wg_m = (f"(tid / 128) / {gn}" if gn > 1 else "tid / 128") if gm > 1 else None
    wg_n = f"(tid / 128) % {gn}" if gn > 1 else None
    for name, buf, d, wg in (("a", A, da0, wg_m), ("b", B, db0, wg_n)):
        if d is None:
            continue
        addr = f"tc::smem_addr({em.shared_ptr[buf]})"
        if wg is not None and step[name]:
            addr = f"{addr} + ({wg}) * {step[name]}u"
        em.w(f"const tc::u64 {name}_desc = tc::wgmma_desc({addr}, {d.base_word():#x}ull);  "
             f"// {'K' if d.k_major else 'MN'}-major, {d.width}-byte swizzle, LBO {d.lbo}, "
             f"SBO {d.sbo}")
    if a_regs:  # the mma.sync A layout: k16 step kk is registers kk * 8 .. kk * 8 + 7
        em.w(f"tc::u32 a_frag[{k // 16}][4];")
        em.w("#pragma unroll")
        em.w(f"for (int r = 0; r < {k // 4}; ++r) a_frag[r / 4][r % 4] = "
             f"tc::pack2({em.name_buf(A)}[2 * r], {em.name_buf(A)}[2 * r + 1]);")
    _fence_acc(em, em.name_buf(C), tm * tn * 4)
    em.w("tc::wgmma_fence();")
    for kk in range(k // 16):
        for t in range(tm):
            sb = db0.starts[(0, kk)] >> 4
            b = f"b_desc + {sb}" if sb else "b_desc"
            if a_regs:
                em.w(f"{fn}(&{em.name_buf(C)}[{t * tn * 4}], a_frag[{kk}], {b});")
                continue
            sa = da0.starts[(t, kk)] >> 4
            a = f"a_desc + {sa}" if sa else "a_desc"
            em.w(f"{fn}(&{em.name_buf(C)}[{t * tn * 4}], {a}, {b});")
    em.w("tc::wgmma_commit();")


def emit_wgmma_mainloop(em, plan, g: Gemm, producers, read_ptr, v: str, start: str,
                        tma_bar: str | None = None, empty_bar: str | None = None) -> None:
    """The pipelined loop of a lone wgmma gemm, one wgmma group left running across iterations.
    Copies run S - 2 iterations ahead (the prologue issued that many), so a stage is refilled
    two iterations after it was read: past the barrier that follows every warpgroup's wait for
    the group before (wgmma_wait<1>). With `tma_bar`, thread 0 issues the copies as TMA loads
    and every thread waits for a stage on its mbarrier (phase flips each round of the stages).
    With `empty_bar` there is no CTA barrier in the loop: each warp arrives on the empty barrier
    of the stage it read at k_iter - 1 once that group is done (wgmma_wait<1>), and thread 0
    waits there before refilling the stage (use u of stage s completes phase u / S)."""
    S = plan.num_stages
    ahead = S - 2
    em.w(f"int stage_r = 0, stage_w = {ahead};  // stages read and refilled by iteration k_iter")
    if tma_bar is not None:
        em.w("tc::u32 phase = 0;  // parity of the mbarrier phase that fills stage_r")
    # not unrolled: ptxas (NVRTC 13.0 and 13.5) was seen to hoist accumulator reads of the code
    # after an unrolled loop above its final wgmma wait
    em.w("#pragma unroll 1")
    em.open("for (int k_iter = 0; k_iter < n_iters; ++k_iter)")
    if tma_bar is not None:
        em.w(f"tc::mbarrier_wait(&{tma_bar}[stage_r], phase);")
    else:
        em.w(f"tc::cp_async_wait<{ahead - 1}>();")
    if empty_bar is None:
        em.sync()
    em.open("if (tid == 0)" if tma_bar is not None else "")
    em.w(f"const int pre = k_iter + {ahead};")
    if empty_bar is not None:  # stage_w was read at k_iter - 2
        em.w(f"if (k_iter >= 2 && pre < n_iters) tc::mbarrier_wait(&{empty_bar}[stage_w], "
             f"((k_iter - 2) / {S}) & 1);")
    producers("pre", "stage_w")
    em.close()
    em.w(f"const int {v} = {start if start != '0' else ''}{' + ' if start != '0' else ''}k_iter;")
    read_ptr()
    em.open("")
    issue_wgmma(em, g)
    em.close()
    em.w("tc::wgmma_wait<1>();  // the group of iteration k_iter - 1 is done: its stage is free "
         + ("(this warp arrives)" if empty_bar is not None else "after the next barrier"))
    if empty_bar is not None:
        em.w(f"if (k_iter >= 1 && tid % 32 == 0) tc::mbarrier_arrive(&{empty_bar}[stage_r == 0 "
             f"? {S - 1} : stage_r - 1]);")
    if tma_bar is not None:
        em.w(f"phase ^= stage_r == {S - 1} ? 1u : 0u;")
    em.w(f"stage_r = stage_r == {S - 1} ? 0 : stage_r + 1;")
    em.w(f"stage_w = stage_w == {S - 1} ? 0 : stage_w + 1;")
    em.close()
    em.w("tc::wgmma_wait<0>();")
    _fence_acc(em, em.name_buf(g.C.buffer), _acc_count(em, g))
    em.read_since_sync = True

"""Software pipeline injection for `T.Pipelined(n, num_stages=S)` (plan: plan_pipeline.py).

    prologue: for s in 0..S-2: issue producers(s) into stage s; commit
    for k in 0..n-1:
        wait until the group of iteration k landed (cp.async.wait_group S-2); barrier
        issue producers(k + S - 1) into stage_w = (k + S - 1) % S (== the stage read at
            k - 1, which the barrier just released); commit (empty groups keep the count uniform)
        consumers of iteration k, reading stage_r = k % S (both counters rotate, no modulo)
    drain: wait_group 0; barrier

A loop whose only consumer is one T.gemm gets the register-pipelined mainloop instead
(emit_mainloop.py), or on wgmma (3+ stages) one whose wgmma run across iterations
(emit_wgmma.emit_wgmma_mainloop: copies S - 2 iterations ahead), its copies as TMA loads
issued by thread 0 when they qualify (emit_tma.py).
"""

from __future__ import annotations


from tilecraft.ir import For, Gemm, SeqStmt

from .emit_copy import emit_copy
from .emit_mainloop import emit_gemm_mainloop, lone_gemm
from .emit_tma import emit_tma_init, emit_tma_loads, tma_plan
from .emit_wgmma import emit_wgmma_mainloop


def lone_wgmma(em, consumers: list, plan):
    """The gemm when it is the loop's only consumer, runs on wgmma, and there are at least 3
    stages (one read by the wgmma still running, one by the next, one or more loading)."""
    if (len(consumers) == 1 and isinstance(consumers[0], Gemm) and plan.num_stages >= 3
            and id(consumers[0]) in em.state.gemm_wgmma
            and em.state.options.wgmma_pipeline):
        return consumers[0]
    return None


def emit_pipelined(em, loop: For) -> None:
    plan = em.state.pipelines[id(loop)]
    S = plan.num_stages
    producer_ids = {id(p) for p in plan.producers}
    body = loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)
    consumers = [s for s in body if id(s) not in producer_ids]
    wgmma = lone_wgmma(em, consumers, plan)
    gemm = None if wgmma is not None else lone_gemm(em, consumers, plan)
    tma = tma_plan(em, plan.producers) if gemm is None else None
    em.comment(loop, f"T.Pipelined: {S} stages over {', '.join(b.name for b in plan.buffers)} "
               f"({'TMA' if tma else 'cp.async'})")
    v = em.name(loop.var)
    start = em.p(loop.start)
    em.open("")
    em.w(f"const int n_iters = {em.p(loop.extent)};")
    stage_elems = {b: em.state.shared[b].nbytes * 8 // b.dtype.bits for b in plan.buffers}
    base = {b: em.shared_ptr[b] for b in plan.buffers}
    bar = em.fresh("tma_bar") if tma is not None else None
    # the lone wgmma loop frees stages by mbarrier (every warp arrives) instead of a CTA barrier
    empty = (em.fresh("tma_empty") if tma is not None and wgmma is not None
             and em.state.options.tma_empty_barriers else None)

    def producers(it: str, stage: str, ops=None, commit: bool = True) -> None:
        """Issue the copies `ops` (default: all) of iteration `it` into `stage`: cp.async by
        every thread, or TMA loads by thread 0 (the caller puts them under `tid == 0`)."""
        em.open(f"if ({it} < n_iters)")
        em.w(f"const int {v} = {start if start != '0' else ''}{' + ' if start != '0' else ''}{it};")
        for b in plan.buffers:
            em.shared_ptr[b] = f"({base[b]} + {stage} * {stage_elems[b]})"
        if tma is not None:
            emit_tma_loads(em, tma, bar, stage)
        else:
            for p in plan.producers if ops is None else ops:
                emit_copy(em, p, async_copy=True)
        em.close()
        if commit and tma is None:
            em.w("tc::cp_async_commit();")

    if em.read_since_sync:
        em.sync()  # the prologue's writes must not overtake earlier shared reads
    if tma is not None:
        emit_tma_init(em, bar, S, tma, empty)
        em.open("if (tid == 0)")
    em.w("#pragma unroll")
    em.open(f"for (int pre = 0; pre < {S - 2 if wgmma else S - 1}; ++pre)")
    producers("pre", "pre")
    em.close()
    if tma is not None:
        em.close()
    for b in plan.buffers:
        em.shared_ptr[b] = base[b]

    def read_ptr() -> None:
        for b in plan.buffers:
            em.shared_ptr[b] = f"({base[b]} + stage_r * {stage_elems[b]})"

    if wgmma is not None:
        emit_wgmma_mainloop(em, plan, wgmma, producers, read_ptr, v, start, tma_bar=bar,
                            empty_bar=empty)
    elif gemm is not None:
        emit_gemm_mainloop(em, loop, plan, gemm, producers, read_ptr)
    else:
        em.w(f"int stage_r = 0, stage_w = {S - 1};  // stages read and refilled by iteration "
             "k_iter")
        if bar is not None:
            em.w("tc::u32 phase = 0;  // parity of the mbarrier phase that fills stage_r")
        em.open("for (int k_iter = 0; k_iter < n_iters; ++k_iter)")
        if bar is not None:
            em.w(f"tc::mbarrier_wait(&{bar}[stage_r], phase);")
        else:
            em.w(f"tc::cp_async_wait<{S - 2}>();")
        em.sync()
        em.open("if (tid == 0)" if bar is not None else "")
        em.w(f"const int pre = k_iter + {S - 1};")
        producers("pre", "stage_w")
        em.close()
        em.w(f"const int {v} = {start if start != '0' else ''}{' + ' if start != '0' else ''}"
             "k_iter;")
        read_ptr()
        em.read_since_sync = False
        for s in consumers:
            em.stmt(s)
        if bar is not None:
            em.w(f"phase ^= stage_r == {S - 1} ? 1u : 0u;")
        em.w(f"stage_r = stage_r == {S - 1} ? 0 : stage_r + 1;")
        em.w(f"stage_w = stage_w == {S - 1} ? 0 : stage_w + 1;")
        em.close()
    if tma is None:
        em.w("tc::cp_async_wait<0>();")
    em.sync()
    for b in plan.buffers:
        em.shared_ptr[b] = base[b]
    em.close()

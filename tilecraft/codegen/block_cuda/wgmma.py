"""`dot_shared` and `dot_wait_group` as CUDA: wgmma.mma_async when selection gave a `WgmmaPlan`
(block/select_wgmma.py), else a SIMT form. A mixin of `BlockPrinter` (printer.py).

With a plan, warpgroup (g_m, g_n) builds one descriptor per shared operand (the tensor's shared
address plus its warpgroup's step) and issues, per k16 step and 64-row tile t, the m64nNk16
helper on C registers t * N/2.. with the slab's start added (in 16-byte units):

    fence the accumulator registers; tc::wgmma_fence()
    for kk, t: helper(&acc[t * N/2], a_desc + start_A(t, kk), b_desc + start_B(kk))
    tc::wgmma_commit()
    synchronous: tc::wgmma_wait<0>(); fence the accumulator registers

`dot_wait_group(n)` is `tc::wgmma_wait<n>()` and fences the accumulators of the asynchronous
dot_shared in scope. wgmma reads shared memory through the async proxy, so in a kernel that
issues any, every barrier is preceded by `tc::fence_proxy_async_shared()` (the generic-proxy
writes before it become visible to the wgmma after it). The helper device functions (one per
shape, dtype and operand majors) are written before the kernel (`self.helpers`).

Without a plan each thread computes the C elements it holds, reading the shared operands
through their layouts (a register A staged row-major through the scratch area, as `dot` does);
an asynchronous one completes at once (a program the VM accepts cannot tell) and, in a kernel
that also runs wgmma, commits an empty wgmma group so that `dot_wait_group(n)` counts as on the
VM.
"""

from __future__ import annotations

from tilecraft.block import AllocateRegister, RegisterTensor
from tilecraft.block.dot_shared import DotShared, DotWaitGroup
from tilecraft.block.select_wgmma import PTX_TYPE, WgmmaPlan
from tilecraft.ir import For, If, SeqStmt, While
from tilecraft.ir.visitor import walk

from ..cuda.indexing import frag_coords


def helper_source(plan: WgmmaPlan) -> str:
    """The device function `plan.func`: one wgmma m64n{nw}k16, A by descriptor (or from four
    registers when plan.trans_a is None), B by descriptor, accumulating into d[0 .. nw/2)."""
    t, n, regs = PTX_TYPE[plan.dtype], plan.nw, plan.nw // 2
    if plan.trans_a is None:
        a_param, a_in = "const tc::u32* a", 4
        a_op, flags = "{" + ", ".join(f"%{regs + i}" for i in range(4)) + "}", f"{plan.trans_b}"
        inputs = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])'
    else:
        a_param, a_in = "tc::u64 a", 1
        a_op, flags, inputs = f"%{regs}", f"{plan.trans_a}, {plan.trans_b}", '"l"(a)'
    d = ", ".join(f"%{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return (f"__device__ __forceinline__ void {plan.func}(float* d, {a_param}, tc::u64 b) {{\n"
            f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + a_in + 1}, 0;\\n"\n'
            f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{d}}}, {a_op}, '
            f'%{regs + a_in}, p, 1, 1, {flags};\\n}}\\n"\n'
            f"      : {outs}\n"
            f'      : {inputs}, "l"(b), "n"(1));\n'
            "}\n")


class WgmmaPrinter:
    # ---- wgmma ------------------------------------------------------------------------------
    @property
    def uses_wgmma(self) -> bool:
        return any(isinstance(p, WgmmaPlan) for p in self.plans.values())

    def fence_acc(self, t: RegisterTensor) -> None:
        self.w("#pragma unroll")
        self.w(f"for (int li = 0; li < {t.layout.local_size}; ++li) "
               f"tc::wgmma_fence_operand({self.tensor(t)}[li]);")

    def _DotShared(self, s: DotShared) -> None:
        plan = self.plans.get(id(s))
        if not isinstance(plan, WgmmaPlan):
            return self.dot_shared_simt(s)
        self.open("")
        self.issue_wgmma(s, plan)
        if not s.asynchronous:
            self.w("tc::wgmma_wait<0>();")
            self.fence_acc(s.out)
        self.close()

    def issue_wgmma(self, s: DotShared, plan: WgmmaPlan) -> None:
        """Descriptors, fences and the wgmma of every k16 step, committed as one group."""
        m, n, k = s.mnk
        a_regs = plan.a is None
        out, c = self.tensor(s.out), self.tensor(s.c)
        self.w(f"// dot_shared {s.a.buffer.name}{'^T' if s.trans_a else ''} x {s.b.buffer.name}"
               f"{'^T' if s.trans_b else ''} -> {s.out.buffer.name}: {m}x{n}x{k}, warpgroups "
               f"{plan.gm}x{plan.gn}, {plan.tm} wgmma.m64n{plan.nw}k16 per warpgroup per k16 "
               f"(A from {'registers' if a_regs else 'shared memory'})"
               f"{', asynchronous' if s.asynchronous else ''}")
        self.helpers.setdefault(plan.func, helper_source(plan))
        gm, gn = plan.gm, plan.gn
        wg_m = (f"(tid / 128) / {gn}" if gn > 1 else "tid / 128") if gm > 1 else None
        wg_n = f"(tid / 128) % {gn}" if gn > 1 else None
        for name, t, d, wg, step in (("a", s.a, plan.a, wg_m, plan.step_a),
                                     ("b", s.b, plan.b, wg_n, plan.step_b)):
            if d is None:
                continue
            addr = f"tc::smem_addr({self.tensor(t)})"
            if wg is not None and step:
                addr = f"{addr} + ({wg}) * {step}u"
            self.w(f"const tc::u64 {name}_desc = tc::wgmma_desc({addr}, {d.base_word():#x}ull);"
                   f"  // {'K' if d.k_major else 'MN'}-major, {d.width}-byte swizzle, "
                   f"LBO {d.lbo}, SBO {d.sbo}")
        if out != c:
            self.per_register(s.out)
            self.w(f"{out}[li] = {c}[li];")
            self.close()
        if a_regs:  # the mma.sync A layout: k16 step kk is registers kk * 8 .. kk * 8 + 7
            a = self.tensor(s.a)
            self.w(f"tc::u32 a_frag[{plan.k16}][4];")
            self.w("#pragma unroll")
            self.w(f"for (int r = 0; r < {plan.k16 * 4}; ++r) a_frag[r / 4][r % 4] = "
                   f"tc::pack2({a}[2 * r], {a}[2 * r + 1]);")
        self.fence_acc(s.out)
        self.w("tc::wgmma_fence();")
        tn = plan.nw // 8
        for kk in range(plan.k16):
            for t in range(plan.tm):
                sb = plan.b.starts[(0, kk)] >> 4
                b = f"b_desc + {sb}" if sb else "b_desc"
                if a_regs:
                    a = f"a_frag[{kk}]"
                else:
                    sa = plan.a.starts[(t, kk)] >> 4
                    a = f"a_desc + {sa}" if sa else "a_desc"
                self.w(f"{plan.func}(&{out}[{t * tn * 4}], {a}, {b});")
        self.w("tc::wgmma_commit();")

    def _DotWaitGroup(self, s: DotWaitGroup) -> None:
        if not self.uses_wgmma:
            self.w(f"// dot_wait_group({s.n}): every dot_shared here completes when issued")
            return
        self.w(f"tc::wgmma_wait<{s.n}>();")
        for t in self.waited_accumulators().get(id(s), ()):
            self.fence_acc(t)

    def waited_accumulators(self) -> dict:
        """id(dot_wait_group) -> the outs of asynchronous wgmma dot_shared in scope there."""
        cached = getattr(self, "_waited", None)
        if cached is None:
            outs = []
            for x in walk(self.program.body):
                if isinstance(x, DotShared) and x.asynchronous and \
                        isinstance(self.plans.get(id(x)), WgmmaPlan) and x.out not in outs:
                    outs.append(x.out)
            cached = self._waited = {}
            _scopes(self.program.body, set(), outs, cached)
        return cached

    def _Synchronize(self, s) -> None:
        if self.uses_wgmma:  # generic-proxy shared writes before the barrier, seen by wgmma
            self.w("tc::fence_proxy_async_shared();")
        super()._Synchronize(s)

    # ---- SIMT -------------------------------------------------------------------------------
    def dot_shared_simt(self, s: DotShared) -> None:
        m, n, k = s.mnk
        self.w(f"// dot_shared {s.a.buffer.name} x {s.b.buffer.name} -> {s.out.buffer.name}: "
               f"{m}x{n}x{k}, SIMT (each thread its own C elements)")
        self.open("")
        staged = self.stage([s.a])[0] if isinstance(s.a, RegisterTensor) else None
        out, c = self.tensor(s.out), self.tensor(s.c)
        if out != c:
            self.per_register(s.out)
            self.w(f"{out}[li] = {c}[li];")
            self.close()
        self.open(f"for (int k = 0; k < {k}; ++k)")
        self.per_register(s.out)
        i, j = frag_coords(s.out.layout, "tid", "li")
        if staged is not None:
            a = f"{staged}[({i}) * {k} + k]"
        else:
            idx = ["k", i] if s.trans_a else [i, "k"]
            a = f"{self.tensor(s.a)}[{self.shared_offset(s, s.a, idx)}]"
        idx = [j, "k"] if s.trans_b else ["k", j]
        b = f"{self.tensor(s.b)}[{self.shared_offset(s, s.b, idx)}]"
        self.w(f"{out}[li] += tc::cast<float>({a}) * tc::cast<float>({b});")
        self.close()
        self.close()
        self.close()
        if s.asynchronous and self.uses_wgmma:  # an empty group: the waits count as on the VM
            self.w("tc::wgmma_commit();")


def _scopes(s, scope: set, outs: list, found: dict) -> None:
    """Record, per dot_wait_group(n), the tensors of `outs` allocated in scope there, but for
    the outs of the n asynchronous dot_shared just before it in its sequence (still running:
    nothing reads them before a later wait, which fences them; as the emitter's mainloop)."""
    if isinstance(s, SeqStmt):
        issued: list = []
        for c in s.stmts:
            if isinstance(c, DotShared) and c.asynchronous:
                issued.append(c.out)
            if isinstance(c, DotWaitGroup):
                running = set(issued[-c.n:]) if c.n else set()
                found[id(c)] = [t for t in outs if t in scope and t not in running]
                continue
            _scopes(c, scope, outs, found)
        return
    elif isinstance(s, (For, While)):
        _scopes(s.body, set(scope), outs, found)
    elif isinstance(s, If):
        _scopes(s.then_body, set(scope), outs, found)
        if s.else_body is not None:
            _scopes(s.else_body, set(scope), outs, found)
    elif isinstance(s, AllocateRegister):
        scope.add(s.out)
    elif isinstance(s, DotWaitGroup):
        found[id(s)] = [t for t in outs if t in scope]

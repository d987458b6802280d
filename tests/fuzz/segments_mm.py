"""Gemm, atomic and block-level scalar segments.

Gemm: products of fp16/bf16 are exact in fp32; the K sum may run in any order in fp32
(error bound (K + 2) * u32 * (|A| @ |B|)). Atomics from several blocks commute: integer adds
wrap, max/min are exact, float adds may round once per add in the destination type.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as D
from . import values as M
from .exprs import DATA, INDEX, Bin, Cast, ExprGen, Ref
from .segments import _alloc
from .stmts import BodyGen, Let, Loop, Store, Target, render, run, top_lets
from .tiles import (Ctx, Param, Segment, pick_dtype, place, read_tile, tile_shape, unknown,
                    write_tile)
from .values import V

U32 = D.ALL["float32"].u
I32 = D.ALL["int32"]


class GemmSeg(Segment):
    def __init__(self, ctx: Ctx):
        r, nm, f = ctx.rng, ctx.names, ctx.feats
        cap = ctx.threads * 32
        while True:
            self.bm, self.bn = r.choice([16, 32, 64]), r.choice([16, 32, 64])
            if self.bm * self.bn <= cap:
                break
        self.bk, self.nk = r.choice([16, 32]), r.randint(1, 4)
        gx, gy = ctx.grid
        part = f.partial
        self.M = gy * self.bm - (r.randint(0, self.bm - 1) if part else 0)
        self.N = gx * self.bn - (r.randint(0, self.bn - 1) if part else 0)
        self.K = self.nk * self.bk - (r.randint(0, self.bk - 1) if part else 0)
        ins = [d for d in ("float16", "bfloat16") if d in f.dtypes] or ["float16"]
        self.t = D.get(r.choice(ins))
        self.ta, self.tb = r.random() < 0.3, r.random() < 0.3
        self.out_t = D.get(r.choice(["float32", "float32", self.t.name]))
        self.a_frag = r.random() < 0.25
        self.loop = r.choice(["pipelined", "pipelined", "serial", "range"] if f.pipelined
                             else ["serial", "range"])
        if self.nk == 1 and r.random() < 0.4:
            self.loop = "none"
        self.stages = r.choice([0, 1, 2, 3])
        self.epi = r.choice([None, None, "relu", "scale"])
        self.policy = r.choice([None, None, None, "FullRow", "FullCol", "Square"])
        self.names = {k: nm.fresh(k) for k in ("A", "B", "C", "A_s", "B_s", "C_f", "A_f", "ko",
                                               "i", "j")}
        a_shape = (self.K, self.M) if self.ta else (self.M, self.K)
        b_shape = (self.N, self.K) if self.tb else (self.K, self.N)
        n = self.names
        self._params = [Param(n["A"], a_shape, self.t.name), Param(n["B"], b_shape, self.t.name),
                        Param(n["C"], (self.M, self.N), self.out_t.name)]

    def lines(self, ctx: Ctx) -> list[str]:
        n, bm, bn, bk = self.names, self.bm, self.bn, self.bk
        a_tile = (bk, bm) if self.ta else (bm, bk)
        b_tile = (bn, bk) if self.tb else (bk, bn)
        out = [_alloc(n["A_s"], "shared", a_tile, self.t),
               _alloc(n["B_s"], "shared", b_tile, self.t),
               _alloc(n["C_f"], "fragment", (bm, bn), D.ALL["float32"])]
        if self.a_frag:
            out.append(_alloc(n["A_f"], "fragment", a_tile, self.t))
        k = n["ko"] if self.loop != "none" else "0"
        am, ak, bn_, bk_ = f"{ctx.by} * {bm}", f"{k} * {bk}", f"{ctx.bx} * {bn}", f"{k} * {bk}"
        ra, ca = (ak, am) if self.ta else (am, ak)
        rb, cb = (bn_, bk_) if self.tb else (bk_, bn_)
        body = [f"T.copy({n['A']}[{ra}, {ca}], {n['A_s']})",
                f"T.copy({n['B']}[{rb}, {cb}], {n['B_s']})"]
        a_op = n["A_s"]
        if self.a_frag:
            body.append(f"T.copy({n['A_s']}, {n['A_f']})")
            a_op = n["A_f"]
        kw = (", transpose_A=True" if self.ta else "") + (", transpose_B=True" if self.tb else "")
        if self.policy:
            kw += f", policy=T.GemmWarpPolicy.{self.policy}"
        if self.loop == "none":
            out += body + [f"T.gemm({a_op}, {n['B_s']}, {n['C_f']}{kw}, clear_accum=True)"]
        else:
            out.append(f"T.clear({n['C_f']})")
            head = {"pipelined": f"T.Pipelined({self.nk}, num_stages={self.stages})",
                    "serial": f"T.serial({self.nk})", "range": f"range({self.nk})"}[self.loop]
            out.append(f"for {n['ko']} in {head}:")
            out += ["    " + s for s in body + [f"T.gemm({a_op}, {n['B_s']}, {n['C_f']}{kw})"]]
        if self.epi:
            i, j = n["i"], n["j"]
            rhs = f"T.max({n['C_f']}[{i}, {j}], 0)" if self.epi == "relu" else \
                f"{n['C_f']}[{i}, {j}] * 0.5"
            out += [f"for {i}, {j} in T.Parallel({bm}, {bn}):", f"    {n['C_f']}[{i}, {j}] = {rhs}"]
        out.append(f"T.copy({n['C_f']}, {n['C']}[{ctx.by} * {bm}, {ctx.bx} * {bn}])")
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        n, kk = self.names, self.nk * self.bk
        a_all, b_all = state[n["A"]].v, state[n["B"]].v
        a_all = a_all.T if self.ta else a_all
        b_all = b_all.T if self.tb else b_all
        for bx, by in self.blocks(ctx):
            a = np.zeros((self.bm, kk))
            b = np.zeros((kk, self.bn))
            rows = a_all[by * self.bm:(by + 1) * self.bm]
            a[:rows.shape[0], :self.K] = rows
            cols = b_all[:, bx * self.bn:(bx + 1) * self.bn]
            b[:self.K, :cols.shape[1]] = cols
            c = a @ b
            e = (self.K + 2) * U32 * (np.abs(a) @ np.abs(b)) + D.ALL["float32"].tiny
            acc = V(D.ALL["float32"], c, e, np.zeros(c.shape, bool))
            if self.epi == "relu":
                acc = M.binop("max", acc, M.exact(0.0, acc.t))
            elif self.epi == "scale":
                acc = M.binop("*", acc, M.exact(0.5, acc.t))
            acc = M.cast(acc, D.ALL["float32"])
            c_name = n["C"]
            state[c_name] = write_tile(state[c_name], (by * self.bm, bx * self.bn), acc)


class AtomicSeg(Segment):
    """Blocks combine tiles (or elements) into shared places of Y with T.atomic_<kind>."""

    def __init__(self, ctx: Ctx):
        r, nm, f = ctx.rng, ctx.names, ctx.feats
        gx, gy = ctx.grid
        self.kind = r.choice(["add", "add", "max", "min"])
        common = ["float32", "int32"] + (["float16", "bfloat16"] if self.kind == "add" else [])
        exotic = ["int64", "uint32", "int8", "float16", "bfloat16", "int16", "uint8"]
        pool = [d for d in common if d in f.dtypes]
        if f.atomic_exotic and r.random() < 0.15:
            pool = [d for d in exotic if d in f.dtypes] or pool
        self.t = D.get(r.choice(pool or ["float32"]))
        self.form = r.choice(["tile", "tile", "scalar"] +
                             (["parallel"] if f.atomic_parallel and r.random() < 0.3 else []))
        self.ry, self.rx = r.randint(1, gy), r.randint(1, gx)
        self.x_name, self.y_name, self.b = nm.fresh("X"), nm.fresh("Y"), nm.fresh("t")
        if self.form == "scalar":
            self.shape = ()
            x_shape, y_shape = (gy, gx), (self.ry, self.rx)
        else:
            self.shape = tile_shape(ctx, per_thread=4, two_d=1.0)
            self.pl = place(ctx, self.shape)
            x_shape = self.pl.tensor
            tm, tn = self.shape
            y_shape = (self.ry * tm, self.rx * tn) if self.form == "tile" else (tn,)
        self.scope = "shared" if r.random() < 0.15 else "fragment"
        self.idx = [nm.fresh("i"), nm.fresh("j")]
        self._params = [Param(self.x_name, x_shape, self.t.name),
                        Param(self.y_name, y_shape, self.t.name)]
        # counted: each block also counts itself in its cell (an ordered atomic that returns
        # the count); the cell's last block copies the cell's total into Z and resets the count
        self.counted = self.form == "scalar" and f.atomic_ordered and r.random() < 0.5
        if self.counted:
            self.order = r.choice(["acq_rel", "seq_cst"])
            self.c_name, self.z_name, self.n = nm.fresh("C"), nm.fresh("Z"), nm.fresh("n")
            self._params += [Param(self.c_name, y_shape, "int32", zeros=True),
                             Param(self.z_name, y_shape, self.t.name)]

    def lines(self, ctx: Ctx) -> list[str]:
        fn = f"T.atomic_{self.kind}"
        if self.form == "scalar":
            cell = f"{ctx.by} % {self.ry}, {ctx.bx} % {self.rx}"
            out = [f"{fn}({self.y_name}[{cell}], {self.x_name}[{ctx.by}, {ctx.bx}])"]
            if self.counted:  # (the blocks of a cell: those with its row and column residues)
                gx, gy = ctx.grid
                count = (f"(({gy - 1} - {ctx.by} % {self.ry}) // {self.ry} + 1) * "
                         f"(({gx - 1} - {ctx.bx} % {self.rx}) // {self.rx} + 1)")
                out += [f"{self.n} = T.atomic_add({self.c_name}[{cell}], 1, "
                        f'memory_order="{self.order}", return_prev=True)',
                        f"if {self.n} == {count} - 1:",
                        f"    {self.z_name}[{cell}] = {self.y_name}[{cell}]",
                        f"    {self.c_name}[{cell}] = 0"]
            return out
        tm, tn = self.shape
        out = [_alloc(self.b, self.scope, self.shape, self.t),
               f"T.copy({self.pl.at(ctx, self.x_name)}, {self.b})"]
        if self.form == "tile":
            out.append(f"{fn}({self.y_name}[({ctx.by} % {self.ry}) * {tm}, "
                       f"({ctx.bx} % {self.rx}) * {tn}], {self.b})")
        else:
            i, j = self.idx
            out += [f"for {i}, {j} in T.Parallel({tm}, {tn}):",
                    f"    {fn}({self.y_name}[{j}], {self.b}[{i}, {j}])"]
        return out

    def model(self, state: dict, ctx: Ctx) -> None:
        y = state[self.y_name].full(state[self.y_name].shape)
        contrib = []  # (index slices into y, values)
        for bx, by in self.blocks(ctx):
            if self.form == "scalar":
                contrib.append(((by % self.ry, bx % self.rx), state[self.x_name][by, bx]))
                continue
            tile = read_tile(state[self.x_name], self.pl.starts(bx, by, ctx.grid[0]), self.shape)
            tm, tn = self.shape
            if self.form == "tile":
                r0, c0 = (by % self.ry) * tm, (bx % self.rx) * tn
                contrib.append(((slice(r0, r0 + tm), slice(c0, c0 + tn)), tile))
            else:
                for i in range(tm):
                    contrib.append(((slice(0, tn),), tile[i]))
        v, e, dc = y.v.copy(), y.e.copy(), y.dc.copy()
        mag = np.abs(v) if self.t.is_float else None
        count = np.zeros(v.shape)
        for where, c in contrib:
            cv = M.cast(c, self.t).full(np.shape(v[where]))
            if self.kind == "add":
                v[where] = v[where] + cv.v
            else:
                fn = np.maximum if self.kind == "max" else np.minimum
                v[where] = fn(v[where], cv.v)
            if self.t.is_float:
                mag[where] = mag[where] + np.abs(cv.v)
            count[where] += 1
            dc[where] |= cv.dc
        if self.t.is_float and self.kind == "add":
            e = e + (2 * count + 1) * self.t.u * mag + count * self.t.tiny
        elif not self.t.is_float:
            v = np.asarray(D.wrap(np.asarray(v, dtype=object), self.t), dtype=object)
        state[self.y_name] = V(self.t, v, e, dc)
        if self.counted:  # every cell has a block: its last one copied the total
            state[self.z_name] = state[self.y_name]
            state[self.c_name] = M.exact(np.zeros(v.shape, dtype=np.int64), D.get("int32"))


class ScalarSeg(Segment):
    """Block-level scalar code: lets of global elements, a T.alloc_var accumulator, a serial
    loop over a row, device ifs, rebinding; results stored as elements of Y."""

    def __init__(self, ctx: Ctx):
        r, nm, f = ctx.rng, ctx.names, ctx.feats
        gx, gy = ctx.grid
        self.w, self.w2 = r.randint(1, 4), r.randint(1, 3)
        self.x = Param(nm.fresh("X"), (gy, gx * self.w), pick_dtype(ctx).name)
        self.y = Param(nm.fresh("Y"), (gy, gx * self.w2), pick_dtype(ctx).name)
        self.xt, self.yt = D.get(self.x.dtype), D.get(self.y.dtype)
        self.xs = [Ref(self.xt, f"{self.x.name}[{ctx.by}, {ctx.bx} * {self.w} + {c}]", f"@x{c}",
                       DATA) for c in range(self.w)]
        leaves = self.xs + [Ref(I32, ctx.bx, "@bx", INDEX), Ref(I32, ctx.by, "@by", INDEX)]
        eg = ExprGen(r, leaves, f)
        self.targets = [Target(f"{self.y.name}[{ctx.by}, {ctx.bx} * {self.w2} + {c}]", "@y",
                               self.yt, (c,)) for c in range(self.w2)]
        self.var = nm.fresh("acc")
        self.var_t = pick_dtype(ctx)
        vref = Ref(self.var_t, self.var, self.var, DATA)
        vtarget = Target(self.var, self.var, self.var_t)
        body = [Store(vtarget, eg.expr(self.var_t, 2), keep=True)]
        eg.leaves.append(vref)
        bg = BodyGen(r, eg, f, nm, vars=(self.var,), rebind=f.rebind)
        body += bg.body(self.targets + [vtarget], 0, [], r.randint(2, 5))
        k = nm.fresh("k")
        xk = Ref(self.xt, f"{self.x.name}[{ctx.by}, {ctx.bx} * {self.w} + {k}]", "@xk")
        step = xk if self.xt is self.var_t else Cast(self.var_t, xk)
        body.append(Loop(k, self.w, r.choice(["serial", "range", "unroll"]),
                         [Store(vtarget, Bin(self.var_t, r.choice(["+", "max", "-"]), vref,
                                             step))]))
        if f.rebind and r.random() < 0.5:
            s = nm.fresh("s")
            sref = Ref(self.xt, s, s)
            body += [Let(s, self.xs[0]),
                     Loop(nm.fresh("k"), self.w, "serial",
                          [Let(s, Bin(self.xt, "+", sref, self.xs[-1]))])]
            body.append(Store(self.targets[-1], sref))
        body.append(Store(self.targets[0], vref))
        self._params = [self.x, self.y]
        types = {s.name: s.x.t for s in body if isinstance(s, Let)}
        self.traces = []
        for n, name in enumerate(top_lets(body)[-4:]):  # last values of top-level lets
            p = Param(nm.fresh("Y"), (gy, gx), types[name].name)
            self.traces.append(p)
            self._params.append(p)
            body.append(Store(Target(f"{p.name}[{ctx.by}, {ctx.bx}]", f"@tr{n}", types[name]),
                              Ref(types[name], name, name)))
        self.body = body
        self.k = k

    def lines(self, ctx: Ctx) -> list[str]:
        return [f'{self.var} = T.alloc_var("{self.var_t.name}")'] + render(self.body, 0)

    def model(self, state: dict, ctx: Ctx) -> None:
        x = state[self.x.name]
        for bx, by in self.blocks(ctx):
            env = {"@bx": M.exact(bx, I32), "@by": M.exact(by, I32), self.var: unknown(self.var_t)}
            for c in range(self.w):
                env[f"@x{c}"] = x[by, bx * self.w + c]
            env["@xk"] = lambda en, by=by, bx=bx: x[by, bx * self.w + int(en[self.k].v)]
            y = state[self.y.name]
            env["@y"] = y[by, bx * self.w2:(bx + 1) * self.w2]
            for k, p in enumerate(self.traces):
                env[f"@tr{k}"] = state[p.name][by, bx]
            run(self.body, env)
            for k, p in enumerate(self.traces):
                tr = state[p.name].full(state[p.name].shape)
                tr.v[by, bx], tr.e[by, bx], tr.dc[by, bx] = (env[f"@tr{k}"].v, env[f"@tr{k}"].e,
                                                             env[f"@tr{k}"].dc)
                state[p.name] = tr
            upd = y.full(y.shape)
            sl = (by, slice(bx * self.w2, (bx + 1) * self.w2))
            upd.v[sl], upd.e[sl], upd.dc[sl] = env["@y"].v, env["@y"].e, env["@y"].dc
            state[self.y.name] = upd

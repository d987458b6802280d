"""Random tile programs, as DSL source, for the shared-memory planner's property tests.

Five shared tiles, two fragments and a row-sum fragment, in one block of 128 threads (grid 2):
copies global -> shared -> fragment -> shared, partial updates, element-wise T.Parallel loops,
cross-warp reductions, serial and pipelined loops and `if bx == 0` branches, nested twice. A
buffer is read only after a write on every path, so the outputs are defined (no NaN read)."""

from __future__ import annotations

import random

ROWS, COLS = 4, 256
NS, NF = 5, 2


def random_program(seed: int) -> str:
    """A module defining `make()`, which returns the program's PrimFunc."""
    rng = random.Random(seed)
    lines: list[str] = []
    out = [0]

    def emit(ind, s):
        lines.append("    " * ind + s)

    def block(ind, depth, init_s, init_f, in_loop):
        """Emit 1..5 statements; returns the buffers initialized unconditionally."""
        init_s, init_f = set(init_s), set(init_f)
        for _ in range(rng.randint(1, 5)):
            kinds = ["load"] * 3
            if init_s:
                kinds += ["to_frag"] * 3 + ["par_s"] * 2 + ["update"]
            if init_f:
                kinds += ["from_frag", "store", "store", "reduce"]
            if init_f and init_s:
                kinds += ["par_f"]
            if depth < 2:
                kinds += ["serial", "pipelined", "if"]
            k = rng.choice(kinds)
            row = "k * 4" if in_loop and rng.random() < 0.5 else f"{rng.randrange(8) * 4}"
            if k == "load":
                i = rng.randrange(NS)
                emit(ind, f"T.copy(X[{row}, 0], S{i})")
                init_s.add(i)
            elif k == "to_frag":
                i, j = rng.choice(sorted(init_s)), rng.randrange(NF)
                emit(ind, f"T.copy(S{i}, F{j})")
                init_f.add(j)
            elif k == "from_frag":
                i, j = rng.randrange(NS), rng.choice(sorted(init_f))
                emit(ind, f"T.copy(F{j}, S{i})")
                init_s.add(i)
            elif k == "update":  # a partial write keeps the rest of the buffer
                i = rng.choice(sorted(init_s))
                emit(ind, f"T.copy(X[{row}, 0], S{i}[0:2, 0:{COLS}])")
            elif k == "par_s":
                b = rng.choice(sorted(init_s))
                a = b if rng.random() < 0.3 else rng.randrange(NS)
                emit(ind, f"for i, j in T.Parallel({ROWS}, {COLS}):")
                emit(ind + 1, f"S{a}[i, j] = S{b}[i, j] * 0.5 + 1.0")
                init_s.add(a)
            elif k == "par_f":
                c, b = rng.choice(sorted(init_f)), rng.choice(sorted(init_s))
                emit(ind, f"for i, j in T.Parallel({ROWS}, {COLS}):")
                emit(ind + 1, f"F{c}[i, j] = F{c}[i, j] * 0.25 + S{b}[i, j]")
            elif k == "reduce":
                c = rng.choice(sorted(init_f))
                emit(ind, f"T.reduce_sum(F{c}, R, dim=1)")
                emit(ind, f"for i, j in T.Parallel({ROWS}, {COLS}):")
                emit(ind + 1, f"F{c}[i, j] = F{c}[i, j] - R[i] * 0.001")
            elif k == "store":
                c = rng.choice(sorted(init_f))
                emit(ind, f"T.copy(F{c}, Y[bx * {4 * 64} + {out[0] * 4}, 0])")
                out[0] = min(out[0] + 1, 63)
            elif k == "serial":
                emit(ind, "for k in T.serial(2):")
                s2, f2 = block(ind + 1, depth + 1, init_s, init_f, True)
                init_s |= s2
                init_f |= f2
            elif k == "pipelined":
                i = rng.randrange(NS)
                emit(ind, "for k in T.Pipelined(3, num_stages=2):")
                emit(ind + 1, f"T.copy(X[k * 4, 0], S{i})")
                s2, f2 = block(ind + 1, depth + 1, init_s | {i}, init_f, True)
                init_s |= s2 | {i}
                init_f |= f2
            elif k == "if":
                emit(ind, "if bx == 0:")
                block(ind + 1, depth + 1, init_s, init_f, in_loop)
                if rng.random() < 0.5:
                    emit(ind, "else:")
                    block(ind + 1, depth + 1, init_s, init_f, in_loop)
        return init_s, init_f

    _, init_f = block(3, 0, set(), set(), False)
    for c in sorted(init_f):  # make every fragment's final value observable
        emit(3, f"T.copy(F{c}, Y[bx * {4 * 64} + {out[0] * 4}, 0])")
        out[0] = min(out[0] + 1, 63)
    head = [
        "import tilecraft.language as T",
        "",
        "",
        "def make():",
        "    @T.prim_func",
        f'    def prog(X: T.Tensor((32, {COLS}), "float32"),',
        f'             Y: T.Tensor((512, {COLS}), "float32")):',
        "        with T.Kernel(2, threads=128) as bx:",
    ]
    head += [f'            S{i} = T.alloc_shared(({ROWS}, {COLS}), "float32")' for i in range(NS)]
    head += [f'            F{i} = T.alloc_fragment(({ROWS}, {COLS}), "float32")' for i in range(NF)]
    head += [f'            R = T.alloc_fragment(({ROWS},), "float32")']
    return "\n".join(head + lines + ["", "    return prog", ""])

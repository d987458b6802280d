"""The generator's feature mix: every family of programs and every construct can be turned off
(`--no divmod,rebind`) to isolate a defect; `--dtypes int8,float16` narrows the element types."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from . import dtypes as D

FAMILIES = ("copy", "ew", "reduce", "cumsum", "gemm", "atomic", "scalar")

HELP = {
    "copy": "tile copies global/shared/fragment/local, with casts and partial slices",
    "ew": "T.Parallel element-wise expressions",
    "reduce": "T.reduce_sum/max/min/abssum/absmax",
    "cumsum": "T.cumsum",
    "gemm": "T.gemm (fp16/bf16 -> fp32), optionally in T.Pipelined loops",
    "atomic": "T.atomic_add/max/min, tile and scalar, from several blocks",
    "scalar": "block-level scalar code: lets, T.alloc_var, serial loops, stores of elements",
    "casts": "T.cast between element types",
    "divmod": "// and % (floor semantics)",
    "float_divmod": "// and % on floats",
    "truncdiv": "/ on integers (truncating)",
    "minmax": "T.min / T.max / min / max",
    "select": "T.if_then_else and `a if c else b`",
    "fma": "T.fma (fused: one rounding)",
    "bitwise": "& | ^ on integers",
    "shifts": "<< and >> on integers (counts in and outside [0, bits))",
    "mixed": "operations on two types (implicit conversion to the wider / the float type)",
    "device_if": "if/else on device values (element-wise masks and block-level branches)",
    "loops": "serial / range / unroll loops inside bodies",
    "rebind": "rebinding a name inside an if or a loop (a mutable local)",
    "partial": "partial tiles and start corners past the tensor edge",
    "neg_corner": "start corners before the tensor start (negative)",
    "odd_shapes": "tile extents that are not powers of two",
    "names": "identifiers the compiler might use itself (red, tid, int, ...)",
    "scalars": "scalar kernel parameters",
    "local": "T.alloc_local tiles",
    "pipelined": "T.Pipelined loops",
    "atomic_parallel": "scalar atomics inside T.Parallel",
    "atomic_exotic": "atomics on element types without a native instruction",
    "atomic_ordered": "block-level atomics that return the old value, ordered (acq_rel / "
                      "seq_cst): the last block to count itself in a cell copies the cell's sum",
    "reduce_shared": "reductions reading a shared tile",
    "cluster": "a thread-block cluster (cluster_dims): blocks read each other's shared tiles "
               "through T.remote between T.cluster_sync barriers",
    "gather": "tile copies at rows read from shared memory (an index staged by T.copy)",
    "lowbit": "1- to 8-bit codes loaded, viewed and cast in registers (the Tilus level; also "
              "codes in bytes by T.cast_bytes), minus constants or zero codes, times powers "
              "of two",
    "var_alias": "`y = x` with x a T.alloc_var (a bare var on the right of an assignment)",
    "rebind_parallel": "rebinding inside T.Parallel bodies (refused with TC116 today)",
}


@dataclass(frozen=True)
class Features:
    copy: bool = True
    ew: bool = True
    reduce: bool = True
    cumsum: bool = True
    gemm: bool = True
    atomic: bool = True
    scalar: bool = True
    casts: bool = True
    divmod: bool = True
    float_divmod: bool = True
    truncdiv: bool = True
    minmax: bool = True
    select: bool = True
    fma: bool = True
    bitwise: bool = True
    shifts: bool = True
    mixed: bool = True
    device_if: bool = True
    loops: bool = True
    rebind: bool = True
    partial: bool = True
    neg_corner: bool = True
    odd_shapes: bool = True
    names: bool = True
    scalars: bool = True
    local: bool = True
    pipelined: bool = True
    atomic_parallel: bool = True
    atomic_exotic: bool = True
    atomic_ordered: bool = True
    reduce_shared: bool = True
    cluster: bool = True
    gather: bool = True
    lowbit: bool = True
    var_alias: bool = True
    rebind_parallel: bool = True
    dtypes: tuple = field(default=tuple(D.ALL))

    def families(self) -> list[str]:
        return [f for f in FAMILIES if getattr(self, f)]

    def spec(self) -> str:
        """A compact string that `parse` turns back into these features."""
        off = [f.name for f in fields(self) if f.name != "dtypes" and not getattr(self, f.name)]
        out = f"no={','.join(off)}"
        if tuple(self.dtypes) != tuple(D.ALL):
            out += f" dtypes={','.join(self.dtypes)}"
        return out


def parse(no: str = "", dtypes: str = "", only: str = "") -> Features:
    """Features from `--no a,b`, `--dtypes x,y` and `--only family,family` strings."""
    names = {f.name for f in fields(Features)} - {"dtypes"}
    kw = {}
    for flag in filter(None, (s.strip() for s in no.split(","))):
        if flag not in names:
            raise ValueError(f"unknown feature {flag!r}; known: {', '.join(sorted(names))}")
        kw[flag] = False
    if only:
        keep = {s.strip() for s in only.split(",") if s.strip()}
        bad = keep - set(FAMILIES)
        if bad:
            raise ValueError(f"unknown family {sorted(bad)}; families: {', '.join(FAMILIES)}")
        kw.update({f: False for f in FAMILIES if f not in keep})
    if dtypes:
        ds = tuple(s.strip() for s in dtypes.split(",") if s.strip())
        bad = [d for d in ds if d not in D.ALL]
        if bad:
            raise ValueError(f"unknown dtypes {bad}; known: {', '.join(D.ALL)}")
        kw["dtypes"] = ds
    return replace(Features(), **kw)


def from_spec(spec: str) -> Features:
    parts = dict(p.split("=", 1) for p in spec.split() if "=" in p)
    return parse(no=parts.get("no", ""), dtypes=parts.get("dtypes", ""))

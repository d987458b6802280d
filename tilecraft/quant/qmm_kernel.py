"""The quantized matmul template (tilecraft/quant/qmm.py describes it and the packed format).

(No `from __future__ import annotations` here: the kernel's parameter annotations name values of
the enclosing factory, which must stay real closure variables.)
"""

import tilecraft
import tilecraft.language as T
from tilecraft.dtypes import resolve
from tilecraft.layout import Fragment, local, spatial
from tilecraft.quant.qmm import bytes_parts, in_bytes, mma_layout, pack_layout, plane_bits


def byte_layout(warps: int, rows: int, bits: int) -> Fragment:
    """The uint8 layout that loads `rows` packed tiles per warp: (warps * rows, 128 * bits)
    bytes, each tile's 4 * bits bytes per thread in 16-, 8- or 4-byte vectors."""
    n = 4 * bits  # bytes per thread
    n1 = 16 if n % 16 == 0 else (8 if n % 8 == 0 else 4)
    return spatial(warps, 1) * local(rows, 1) * local(1, n // n1).spatial(1, 32).local(1, n1)


def slice_groups(K: int, split: int, group: int) -> int:
    """The scale groups one of `split` K slices touches, at most: its groups when slices are
    whole groups (their scales then copy in 16-byte vectors), else one more at either end."""
    G, KS = K // group, K // split
    return min(G, KS // group if KS % group == 0 else KS // group + 2)


@tilecraft.jit
def qmm_kernel(M, N, K, wtype, xtype="float16", group=128, zero=0, has_zeros=False,
               has_bias=False, BM=16, warps=4, rows=1, BK=64, stages=4, split=1,
               acc_scale=False, zero_products=True, unroll=0, tma=True, zero_codes=False,
               fold_scales=False, zero_fma=True, last_block=False, cluster=False,
               step_scales=False, scale_shift=0):
    """Y = X @ dequant(W).T (+ B) for X (M, K) and the packed (N, K) weight (module docstring).
    Block (bn, bm, bs) computes rows bn*BN.. of Y^T = W X^T for tokens bm*BM.. over the K slice
    bs; with split > 1 it writes its f32 partial sums into P[bs] (`qmm_reduce` adds them).
    `acc_scale`: multiply each group's partial product by the scales (BN x BM products) instead
    of the weights (BN x group elements): for few tokens (needs group % BK == 0). Zeros then
    join the products too: sum (q - z) x = sum q x - z sum x, the sums of X's rows over the group
    by the same mma on a tile of ones (an HMMA per k16 instead of an HADD2 per two weights;
    `zero_products=False` keeps the subtraction). `unroll`: k steps the CUDA compiler unrolls
    (the stages: constant stage addresses). `tma=False`: the k steps' tiles move by cp.async
    even on sm_90a (T.copy's disable_tma). `zero_codes`: Z holds the zeros as uint8 codes below
    2^bits (whole numbers; the caller checked), subtracted from the cast weights, where the
    fast cast absorbs them at no cost (block/select_cast.py `fused_codes`, `fused_bytes_codes`;
    1-, 2-, 3-, 4-, 6-, 7- and 8-bit unsigned weights, 8-bit to f16 only), also at decode
    (instead of the products). With `acc_scale`,
    float weights without zeros to f16 are cast times 2^-h (h: the biases' difference, 14 for
    float4_e2m1), which costs the fast cast one multiply less, and 2^h joins the scales.
    `fold_scales`: the same without acc_scale (prefill), 2^h joining each group's f16 scale
    (the caller checked that every scale times 2^h is finite: qmm.fold_scales).
    `zero_fma`: f16 zeros (not codes) with the scales on the weights take one fused multiply-add
    a weight, q s + (-z s), instead of a subtraction and a multiplication: z s is rounded once
    more (to f16, as AWQ's and Marlin's kernels do; about z 2^-12 of a step), 4-5% faster at
    M = 4096 (benchmarks/NOTES.md, session 18).
    `last_block` (split > 1): each block writes its partial sums to P and counts itself in
    C[bn, bm] (an atomic that returns the count, ordered acq_rel); the tile's last block adds
    the slices in order, as `qmm_reduce` does (the same bits), writes Y and sets the count
    back to 0 for the next call: one launch instead of two (C starts at zero: the caller).
    `step_scales` (acc_scale, a k step a group): S and Z come transposed, (G, N), and each k
    step's group of scales and zeros moves with its tiles through the pipeline (BN contiguous
    values: a 16-byte copy each for a few threads) instead of the K slice's every group up
    front, before the first step (24 KB a block for 1-bit codes at decode, waited for by every
    block before its first step).
    `cluster` (split > 1, at most 8 slices): a tile's slices form a thread-block cluster; each
    block leaves its partial sums in its shared memory and adds, in slice order (the same
    bits again), its 1/split of the tile's rows from every block's (T.remote): no P, no
    counts, no second kernel.
    `scale_shift` e: S holds the scales times 2^e (bf16 scales that f16 would round or
    overflow, moved into its normal range: qmm.scale_shift); the f32 sums are multiplied by
    2^-e before they are written (both exact)."""
    bits = resolve(wtype).bits
    BN = 16 * warps * rows  # output channels (rows of W) per block: `rows` 16-row tiles a warp
    r = BK // 64
    steps = list(range(r))  # the 64-column sub-tiles of a k step
    G = K // group
    KS = K // split  # the K slice of one block
    GS = slice_groups(K, split, group)
    tile_bytes = 128 * bits
    w_layout = spatial(warps, 1) * local(rows, 1) * mma_layout()  # (BN, 64): the mma A operand
    c_layout = spatial(warps, 1) * local(rows, 1) * pack_layout(wtype)  # the codes as packed
    planes = plane_bits(wtype)  # 5-bit ints: planes of the offset-binary code
    fplanes = planes is not None and resolve(wtype).is_float  # 6-bit floats: two planes
    as_bytes = in_bytes(wtype)  # 3-, 6-, 7-bit ints (offset-binary), float6_e3m2: in bytes
    offset = (1 << (bits - 1)) if (planes or as_bytes) and resolve(wtype).kind == "int" else 0
    # (a whole zero point joins the offset the bytes' cast subtracts: below 128, 64 for 3 bits)
    fused_zero = as_bytes and not resolve(wtype).is_float and float(zero).is_integer() \
        and 0 <= offset + zero < (64 if bits == 3 else 128)
    zero = int(zero) if fused_zero else zero
    plane_at = [(p, sum(planes[:i]) * 128, bits - sum(planes[:i + 1]))  # (bits, bytes, shift)
                for i, p in enumerate(planes or ())]
    u_layout = byte_layout(warps, rows, bits)
    s_layout = w_layout.reduce(1, keepdim=True)  # a row's scale, where the row's elements are
    s_row = w_layout.reduce(1, keepdim=False)  # the same registers, rank 1 (step_scales)
    cluster = cluster and split > 1
    assert not cluster or (split <= 8 and BN % split == 0 and not last_block), \
        "a cluster holds at most 8 slices, each adding whole rows"
    # partial sums (unused when split = 1 or the cluster adds them)
    p_shape = (split, M, N) if split > 1 and not cluster else (1, 1, 1)
    c_shape = (N // BN, -(-M // BM)) if split > 1 and last_block else (1, 1)  # arrivals a tile
    # k steps per scale group; one scale a channel (G = 1) split over K: the slice's steps,
    # whose products then take the scale at the slice's end
    per_group = min(group, KS) // BK if acc_scale else 0
    assert not acc_scale or (group % BK == 0 and (KS % group == 0 or G == 1)), \
        "acc_scale needs whole groups of whole k steps in every K slice"
    assert not zero_codes or (has_zeros and not planes), "zero codes: the zeros of one plane"
    # float codes times 2^-fold: the fast cast's own multiply gone (DataType.f16_headroom: the
    # fast cast's fusion rule, select_cast.float_headroom), 2^fold joins the scales (exact)
    fold = (resolve(wtype).f16_headroom if resolve(xtype).name == "float16" else 0) \
        if (acc_scale or fold_scales) and not has_zeros and zero == 0 else 0
    ztype = "uint8" if zero_codes else xtype
    assert not step_scales or (acc_scale and BK == group), \
        "step_scales: the scales on the products (acc_scale), a k step a group"
    s_shape = (G, N) if step_scales else (N, G)
    # f16 zeros without codes, scales on the weights: one fma a weight pair, q s + (-z s)
    zero_fma = zero_fma and has_zeros and not zero_codes and not acc_scale \
        and resolve(xtype).name == "float16"

    @T.prim_func
    def qmm(X: T.Tensor((M, K), xtype), Wp: T.Tensor((N // 16, K // 64 * tile_bytes), "uint8"),
            S: T.Tensor(s_shape, xtype), Z: T.Tensor(s_shape, ztype), B: T.Tensor((N,), xtype),
            Y: T.Tensor((M, N), xtype), P: T.Tensor(p_shape, "float32"),
            C: T.Tensor(c_shape, "int32")):
        with T.Kernel(N // BN, T.ceildiv(M, BM), split, threads=32 * warps,
                      cluster_dims=(1, 1, split) if cluster else None) as (bn, bm, bs):
            X_s = T.alloc_shared((BM, BK), xtype)
            W_s = T.alloc_shared((BN // 16, r * tile_bytes), "uint8")
            # the slice's scales (and zeros), read each step; or the step's own (step_scales)
            S_s = T.alloc_shared((1, BN) if step_scales else (BN, GS), xtype)
            Z_s = T.alloc_shared((1, BN) if step_scales else (BN, GS if has_zeros else 1), ztype)
            acc = T.alloc_fragment((BN, BM), "float32")
            part = T.alloc_fragment((BN, BM), "float32")  # one group's product (acc_scale)
            # the slice's first group (a product when slices are whole groups: the scales'
            # copy then provably starts on a 16-byte boundary and moves in vectors)
            g0 = bs * (KS // group) if KS % group == 0 else bs * KS // group
            if not step_scales:
                T.copy(S[bn * BN, g0], S_s)
            if has_zeros and not step_scales:
                T.copy(Z[bn * BN, g0], Z_s)
            T.clear(acc)
            T.clear(part)
            zeros_on_products = acc_scale and has_zeros and zero_products and not zero_codes
            if zeros_on_products:
                ones = T.allocate_register(xtype, layout=w_layout, init=1.0)
                xsum = T.alloc_fragment((BN, BM), "float32")  # X's rows summed over the group
                T.clear(xsum)
            for k in T.Pipelined(KS // BK, num_stages=stages, unroll=unroll):
                kk = bs * (KS // BK) + k
                T.copy(X[bm * BM, kk * BK], X_s, disable_tma=not tma)
                T.copy(Wp[bn * (BN // 16), kk * r * tile_bytes], W_s, disable_tma=not tma)
                if step_scales:  # (the step's group: kk, a step being a group)
                    T.copy(S[kk, bn * BN], S_s, disable_tma=not tma)
                if step_scales and has_zeros:
                    T.copy(Z[kk, bn * BN], Z_s, disable_tma=not tma)
                zf = None  # the k step's zeros as X's type (zero_codes)
                for j in steps:  # a Python list: unrolled at parse time (constant offsets)
                    if as_bytes:  # each thread's 4 * bits bytes in 2-3 loads, one cast
                        parts = []
                        for _, p, at in bytes_parts(bits):
                            parts.append(T.load_shared(W_s, layout=byte_layout(warps, rows, p),
                                                       offset=[0, j * tile_bytes + at]))
                        if resolve(wtype).is_float:  # (times 2^-fold: no multiply at the bottom)
                            w = T.cast_bytes(parts, wtype, xtype, layout=w_layout, scale=-fold)
                        else:
                            w = T.cast_bytes(parts, f"uint{bits}", xtype, layout=w_layout,
                                             offset=offset + (zero if fused_zero else 0))
                    elif fplanes:  # a float's codes from its two planes, one cast
                        v = []
                        for p, at, _ in plane_at:
                            pb = T.load_shared(W_s, layout=byte_layout(warps, rows, p),
                                               offset=[0, j * tile_bytes + at])
                            pl = spatial(warps, 1) * local(rows, 1) * pack_layout(f"uint{p}")
                            v.append(T.view(pb, dtype=f"uint{p}", layout=pl))
                        w = T.cast_planes(v[0], v[1], wtype, xtype, layout=w_layout, scale=-fold)
                    elif planes:  # each plane cast (times its weight 2^shift), the sum
                        w = None
                        for p, at, shift in plane_at:
                            pb = T.load_shared(W_s, layout=byte_layout(warps, rows, p),
                                               offset=[0, j * tile_bytes + at])
                            pl = spatial(warps, 1) * local(rows, 1) * pack_layout(f"uint{p}")
                            f = T.cast(T.view(pb, dtype=f"uint{p}", layout=pl), xtype,
                                       layout=w_layout)
                            if shift:
                                f = f * (1 << shift)
                            elif zero + offset != 0:  # the zero joins the last plane's cast
                                f = f - (zero + offset)
                            w = f if w is None else w + f
                    else:
                        wb = T.load_shared(W_s, layout=u_layout, offset=[0, j * tile_bytes])
                        w = T.cast(T.view(wb, dtype=wtype, layout=c_layout), xtype,
                                   layout=w_layout)
                        if fold:
                            w = w * (2.0 ** -fold)
                    # (a slice of whole groups starts at its first group: k alone names it)
                    g = (k * BK + j * 64) // group if KS % group == 0 \
                        else (kk * BK + j * 64) // group - g0
                    if zeros_on_products:
                        T.gemm(ones, X_s[:, j * 64:(j + 1) * 64], xsum, transpose_B=True,
                               policy=T.GemmWarpPolicy.FullRow)
                    elif has_zeros and (zero_codes or not zero_fma):
                        # codes: once a k step when it is one group (whole codes: `& mask`
                        # proves the range); values: each 64 columns
                        if not zero_codes or zf is None or group < BK:
                            if step_scales:  # (a row of BN, each thread's rows as s_layout)
                                zf = T.view(T.load_shared(Z_s, layout=s_row, offset=[0, 0],
                                                          dims=[1]), layout=s_layout)
                            else:
                                zf = T.load_shared(Z_s, layout=s_layout, offset=[0, g])
                            if zero_codes:
                                zf = T.cast(zf & ((1 << bits) - 1), xtype)
                        w = w - zf
                    elif zero != 0 and (fplanes or not planes) and not fused_zero:  # (else: cast)
                        w = w - zero
                    if acc_scale:
                        T.gemm(w, X_s[:, j * 64:(j + 1) * 64], part, transpose_B=True,
                               policy=T.GemmWarpPolicy.FullRow)
                    else:
                        sg = T.load_shared(S_s, layout=s_layout, offset=[0, g])
                        if zero_fma:  # q s - z s, one rounding (z s rounded once more)
                            zg = T.load_shared(Z_s, layout=s_layout, offset=[0, g])
                            w = T.fma(w, sg, zg * -sg)
                        else:
                            w = w * (sg * (2.0 ** fold) if fold else sg)
                        T.gemm(w, X_s[:, j * 64:(j + 1) * 64], acc, transpose_B=True,
                               policy=T.GemmWarpPolicy.FullRow)
                if acc_scale:
                    gk = (k * BK) // group if KS % group == 0 else (kk * BK) // group - g0
                    if per_group == 1 or (k + 1) % per_group == 0:  # the group is complete
                        if zeros_on_products and step_scales:
                            for i, t in T.Parallel(BN, BM):
                                acc[i, t] += (part[i, t] - Z_s[0, i] * xsum[i, t]) * S_s[0, i]
                            T.clear(xsum)
                        elif zeros_on_products:
                            for i, t in T.Parallel(BN, BM):
                                acc[i, t] += (part[i, t] - Z_s[i, gk] * xsum[i, t]) * S_s[i, gk]
                            T.clear(xsum)
                        elif step_scales:
                            for i, t in T.Parallel(BN, BM):
                                acc[i, t] += part[i, t] * (2.0 ** fold) * S_s[0, i]
                        else:
                            for i, t in T.Parallel(BN, BM):
                                acc[i, t] += part[i, t] * (2.0 ** fold) * S_s[i, gk]
                        T.clear(part)
            if scale_shift:  # (S held the scales times 2^scale_shift)
                for i, t in T.Parallel(BN, BM):
                    acc[i, t] = acc[i, t] * (2.0 ** -scale_shift)
            if cluster:  # the slices' sums through the cluster's shared memory
                mine = T.alloc_shared((BN, BM), "float32")
                for i, t in T.Parallel(BN, BM):
                    mine[i, t] = acc[i, t]
                T.cluster_sync()
                R = BN // split  # the rows this block adds
                rank = T.cluster_rank()
                out = T.alloc_fragment((R, BM), "float32")
                T.clear(out)
                for p in T.serial(split):  # (in order: qmm_reduce's sums, bit for bit)
                    for i, t in T.Parallel(R, BM):
                        out[i, t] += T.remote(mine, p)[rank * R + i, t]
                for i, t in T.Parallel(R, BM):
                    if bm * BM + t < M:
                        if has_bias:
                            Y[bm * BM + t, bn * BN + rank * R + i] = \
                                out[i, t] + B[bn * BN + rank * R + i]
                        else:
                            Y[bm * BM + t, bn * BN + rank * R + i] = out[i, t]
                T.cluster_sync()  # (no block leaves while another reads its memory)
            else:
                for i, t in T.Parallel(BN, BM):
                    if bm * BM + t < M:
                        if split > 1:
                            P[bs, bm * BM + t, bn * BN + i] = acc[i, t]
                        elif has_bias:
                            Y[bm * BM + t, bn * BN + i] = acc[i, t] + B[bn * BN + i]
                        else:
                            Y[bm * BM + t, bn * BN + i] = acc[i, t]
            if split > 1 and last_block:
                arrived = T.atomic_add(C[bn, bm], 1, memory_order="acq_rel", return_prev=True)
                if arrived == split - 1:  # the tile's last slice: all are in P
                    T.clear(acc)
                    for p in T.serial(split):  # (in order: qmm_reduce's sums, bit for bit)
                        for i, t in T.Parallel(BN, BM):
                            if bm * BM + t < M:
                                acc[i, t] += P[p, bm * BM + t, bn * BN + i]
                    for i, t in T.Parallel(BN, BM):
                        if bm * BM + t < M:
                            if has_bias:
                                Y[bm * BM + t, bn * BN + i] = acc[i, t] + B[bn * BN + i]
                            else:
                                Y[bm * BM + t, bn * BN + i] = acc[i, t]
                    C[bn, bm] = 0  # (every block of the tile has counted: ready for the next)

    return qmm


@tilecraft.jit
def qmm_reduce(M, N, split, xtype="float16", has_bias=False):
    """Y = sum over the split of P (+ B), in X's type: the second kernel of a split-K run."""
    BL = 256 if N % 256 == 0 else 64

    @T.prim_func
    def reduce(P: T.Tensor((split, M, N), "float32"), B: T.Tensor((N,), xtype),
               Y: T.Tensor((M, N), xtype)):
        with T.Kernel(N // BL, M, threads=BL // 2) as (bx, m):
            acc = T.alloc_fragment((BL,), "float32")
            T.clear(acc)
            for p in T.serial(split):
                for i in T.Parallel(BL):
                    acc[i] += P[p, m, bx * BL + i]
            for i in T.Parallel(BL):
                if has_bias:
                    Y[m, bx * BL + i] = acc[i] + B[bx * BL + i]
                else:
                    Y[m, bx * BL + i] = acc[i]

    return reduce

"""The quantized matmul template (Tilus section 9): Y = X @ dequant(W).T for a weight of any
type of 1 to 8 bits, from one kernel written in tilecraft's own language.

The weight is the mma A operand ("swap AB": C^T = W X^T), so its dequantized tile never leaves
the registers: each k step copies the packed bytes of a (BN, BK) weight tile and the (BM, BK)
tile of X into shared memory (pipelined), loads the bytes with the uint8 layout, `view`s them
as the weight type in the A operand layout, casts them to X's type, applies the group's scale
(and zero) and multiplies with X's tile (mma.sync, or wgmma with A from registers on sm_90a).

**Packed format** (what `pack_weight(codes, dtype, layout=pack_layout(dtype))` makes of the
(N, K) codes): uint8 [N / 16, K / 64, 128 * bits], tile (i, j) = rows 16i.., columns 64j.. of W
in the order of `pack_layout(dtype)` over one warp (4 * bits bytes per thread): `mma_layout()` =
`local(1, 4) * (mma A atom)`, for 1-, 2- and 4-bit integers and float4_e2m1 with each 32-bit word
interleaved
(tilecraft.layout.interleave_words: element j at code position (j % 2) * 16/b + j // 2), which
the kernel's cast turns into the mma's order with no byte permutes. 5-bit integers are stored
as bit planes (`pack_codes`): uint4 + uint1, each tile's planes side by side (128 * bits bytes
in all); float6_e2m3 likewise as uint2 (sign, top magnitude bit) + uint4 (low bits) of its
codes. The 3-, 6- and 7-bit integers and float6_e3m2 are stored as codes in bytes (3 bits: in
nibbles), each thread's 32 codes of a tile in 4 * bits bytes (dtypes/packing.py
`pack_bytes`), in parts where uint4, uint2 (and uint1) planes would lie (`bytes_parts`), cast
by byte permutes.

`quant_matmul(x2d, qweight, bias)` is the entry (`tilecraft.quant.matmul` checks the user's
arguments first): it picks tile sizes (`choose_config`; fewer stages where shared memory keeps
a decode grid from one wave: waves.py), builds the kernels once per shape and
options (`_PLANS`) and, with split-K, adds the partial sums by a second kernel (`qmm_reduce`)
or, where N's tiles do not fill the SMs, in the tile's last block (`last_block`).
The kernel itself is qmm_kernel.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tilecraft.dtypes import resolve
from tilecraft.layout import Fragment, local
from tilecraft.layout.atoms import MMA_M16N8K16_F16
from tilecraft.layout.permute import interleave_words

PACK_TILE = (16, 64)  # (rows of W = output channels, columns of W = K) per packed tile


def mma_layout() -> Fragment:
    """A warp's mma A operand over a (16, 64) weight tile: four k16 steps side by side."""
    return local(1, 4) * MMA_M16N8K16_F16.a


def pack_layout(dtype: Any) -> Fragment:
    """The register layout the codes of one packed (16, 64) tile of `dtype` are stored in:
    `mma_layout()`, with interleaved words for the types whose fast cast reads them so (1-, 2-
    and 4-bit integers, float4_e2m1: block/select_cast.py `words_interleave`)."""
    from tilecraft.block.select_cast import words_interleave

    t = resolve(dtype)
    if words_interleave(t):
        return interleave_words(mma_layout(), t.bits)
    return mma_layout()


def plane_bits(dtype: Any) -> tuple[int, ...] | None:
    """The bit planes a 3- or 5-bit integer type or a 6-bit float is stored in (most
    significant first), or None (one plane: the type's own codes, or the 6- and 7-bit integers'
    bytes: `in_bytes`). (6 and 7 bits were planes 4 + 2 and 4 + 2 + 1 from session 18, once the
    planes cast in place, benchmarks/NOTES.md, to session 24; before that the dense fields were
    faster. 6-bit floats: the sign and top magnitude bit, then the low 4 bits, which
    `tc::fast_cast_float_planes` places with a window and a mask each, session 19.)"""
    t = resolve(dtype)
    if t.is_float:
        return (2, 4) if t.bits == 6 and t.f16_headroom and not in_bytes(t) else None
    if not t.is_integer:
        return None
    return {5: (4, 1)}.get(t.bits)


def in_bytes(dtype: Any) -> bool:
    """Whether `dtype` is stored as codes in bytes (`bytes_parts`; 3 bits: in nibbles): the 3-,
    6- and 7-bit integers and float6_e3m2 (session 24; before, as bit planes 2 + 1, 4 + 2 and
    4 + 2 + 1, and float6 as 2 + 4, whose casts cost about 2.2, 2.2, 3 and 2.4 instructions a
    code against 1.3, 1.6, 1.7 and 1.2)."""
    t = resolve(dtype)
    if t.is_float:  # (e2m3 from bytes, its magnitude moved down under the sign each pair, was
        return t.name == "float6_e3m2"  # slower than its planes: 72.5 / 77.7 against 59.5 / 66.5
    return t.is_integer and t.bits in (3, 6, 7)  # us at 28672 x 8192, M = 1 / 16, session 24)


def bytes_parts(bits: int) -> tuple[tuple[int, int, int], ...]:
    """How a thread's 4 * bits bytes of a packed tile of 3-, 6- or 7-bit codes lie in it:
    (bytes, the uint{p} byte layout they share with a p-bit plane, their offset in the tile):
    loads of 16, 8 (and 4) bytes, or 8 and 4 for 3 bits, as the planes of 4 + 2 (+ 1) and
    2 + 1 bits were."""
    if bits == 3:
        return ((8, 2, 0), (4, 1, 256))
    return ((16, 4, 0), (8, 2, 512), (4, 1, 768))[:bits - 4]


def _bytes_columns(bits: int) -> list:
    """Per part of bytes_parts(bits): the tile's byte (column) of thread t's local byte i."""
    from tilecraft.quant.qmm_kernel import byte_layout

    return [byte_layout(1, 1, p).index_table()[..., 1] + at for _, p, at in bytes_parts(bits)]


def pack_codes(codes: Any, dtype: Any) -> Any:
    """The packed format of the (N, K) codes of `dtype` (uint8 [N/16, K/64, 128 * bits], module
    docstring): `pack_weight` in `pack_layout(dtype)`, or for a 5-bit integer its
    bit planes (`plane_bits`) of the offset-binary code (code ^ 2^(bits-1) for signed types),
    each packed as uint2 / uint1 / uint4, side by side in every tile: the kernel casts each
    plane with the fast tricks and adds them (times their weights 2^shift); for a 3-, 6- or
    7-bit integer its offset-binary codes in bytes (`_pack_bytes`; 3 bits: nibbles)."""
    import torch

    from tilecraft.quant.weights import pack_weight

    t = resolve(dtype)
    if in_bytes(t):
        return _pack_bytes(codes, t)
    planes = plane_bits(dtype)
    if planes is None:
        return pack_weight(codes, dtype, layout=pack_layout(dtype))
    u = codes.to(torch.int32) ^ ((1 << (t.bits - 1)) if t.kind == "int" else 0)
    parts, shift = [], t.bits
    for p in planes:
        shift -= p
        plane = ((u >> shift) & ((1 << p) - 1)).to(torch.uint8)
        parts.append(pack_weight(plane, f"uint{p}", layout=pack_layout(f"uint{p}")))
    return torch.cat(parts, dim=-1)


def unpack_codes(packed: Any, dtype: Any) -> Any:
    """The inverse of `pack_codes`: the (N, K) codes (uint8)."""
    import torch

    from tilecraft.quant.weights import unpack_weight

    t = resolve(dtype)
    if in_bytes(t):
        return _unpack_bytes(packed, t)
    planes = plane_bits(dtype)
    if planes is None:
        return unpack_weight(packed, dtype, layout=pack_layout(dtype))
    u, shift, at = None, t.bits, 0
    for p in planes:
        shift -= p
        part = packed[..., at:at + 128 * p].contiguous()
        plane = unpack_weight(part, f"uint{p}", layout=pack_layout(f"uint{p}")).to(torch.int32)
        u = plane << shift if u is None else u | (plane << shift)
        at += 128 * p
    return (u ^ ((1 << (t.bits - 1)) if t.kind == "int" else 0)).to(torch.uint8)


def _pack_bytes(codes: Any, t: Any) -> Any:
    """6- or 7-bit integer codes (N, K), or float6_e3m2's, -> the packed tiles: each thread's 32
    codes of a tile (an int's offset-binary), in `mma_layout()`'s order, as 4 * bits bytes
    (dtypes/packing.py `pack_bytes`; a float's with the sign at the top), placed where the
    kernel's loads read them (`bytes_parts`)."""
    import torch

    from tilecraft.dtypes.packing import pack_bytes

    N, K = (int(x) for x in codes.shape)
    table = torch.as_tensor(mma_layout().index_table(), device=codes.device)
    u = codes.to(torch.uint8) ^ ((1 << (t.bits - 1)) if t.kind == "int" else 0)
    tiles = u.reshape(N // 16, 16, K // 64, 64).permute(0, 2, 1, 3)
    per_thread = tiles[:, :, table[..., 0], table[..., 1]]  # [N/16, K/64, 32, 32]
    b = pack_bytes(per_thread, t.bits, sign_at_top=t.is_float)  # [.., 32, 4 bits]
    out = torch.empty(N // 16, K // 64, 128 * t.bits, dtype=torch.uint8, device=codes.device)
    at = 0
    for (n, _, _), cols in zip(bytes_parts(t.bits), _bytes_columns(t.bits)):
        out[:, :, torch.as_tensor(cols, device=codes.device)] = b[..., at:at + n]
        at += n
    return out


def _unpack_bytes(packed: Any, t: Any) -> Any:
    """The inverse of `_pack_bytes`: the (N, K) codes (uint8)."""
    import torch

    from tilecraft.dtypes.packing import unpack_bytes

    nt, kt = int(packed.shape[0]), int(packed.shape[1])
    parts = [packed[:, :, torch.as_tensor(cols, device=packed.device)]
             for cols in _bytes_columns(t.bits)]
    per_thread = unpack_bytes(torch.cat(parts, dim=-1), t.bits, sign_at_top=t.is_float)
    table = torch.as_tensor(mma_layout().index_table(), device=packed.device)
    tiles = torch.empty(nt, kt, 16, 64, dtype=torch.uint8, device=packed.device)
    tiles[:, :, table[..., 0], table[..., 1]] = per_thread
    codes = tiles.permute(0, 2, 1, 3).reshape(nt * 16, kt * 64)
    return codes ^ ((1 << (t.bits - 1)) if t.kind == "int" else 0)


def packed_shape(n: int, k: int, bits: int) -> tuple[int, int, int]:
    """The shape of the packed bytes of an (n, k) weight of `bits`-bit codes."""
    return n // PACK_TILE[0], k // PACK_TILE[1], PACK_TILE[0] * PACK_TILE[1] * bits // 8


SMS = 132  # the H100's multiprocessors, which the tables below were first measured on


def _decode_traits(bits: int, wtype: Any, N: int) -> tuple[int, int, bool, bool]:
    """(blocks factor, stages, two tiles a warp allowed, unroll every stage) of the decode
    kernel for a weight type and N, measured on the H200 (benchmarks/NOTES.md, session 17).
    The types with the longest casts (3- and 5-bit planes) run faster with 4 to 8 times the
    blocks (more warps hide the cast's latency; the factor splits K in at most 8 slices); 3-bit
    codes in nibbles (session 24) keep the 8 (28672 x 8192, M = 1 / 16: split 8 39.5 / 49.9 us,
    4 40.8 / 50.5, 2 43.9 / 56.1, 1 43.7 / 52.0).
    7-bit integers, cast from bytes since session 24, take 3 stages and no split (28672 x 8192,
    M = 1 / 16: 57.9 / 65.6 us, against 66.4 / 74.4 with the planes' split 8 on 2 stages and
    58.6 / 66.6 on 4 stages). float8 takes one tile a warp and three stages, unrolled,
    unless two tiles still make two blocks per SM (57344 x 8192: 3 stages there were 22%
    slower); so do 8-bit integers where two tiles make one to two blocks per SM (28672 x 8192,
    M = 1: 4.5-5% faster, session 18; other N unmeasured). 6-bit floats, cast from their two
    planes since session 19, take the short casts' traits (28672 x 8192, M = 1 / 16: 58.9 /
    63.3 -> 50.8 / 57.8 us against the long casts' split and unrolling)."""
    t = resolve(wtype) if wtype is not None else None
    integer = t is None or t.is_integer
    wide = N // 128 >= 2 * SMS
    if bits == 8 and (not integer or SMS <= N // 128 < 2 * SMS):  # (float8; uint8/int8)
        return 1, 4 if wide else 3, wide, not wide
    if integer:
        factor = {3: 8, 5: 4}.get(bits, 1)
        return factor, 3 if bits == 7 else 4, True, True
    if bits == 4 or plane_bits(t) or in_bytes(t):  # float4 (interleaved words), 6-bit floats
        return 1, 4, True, True  # (two planes; e3m2 in bytes): short casts, the scale folded in
    return 4, 4, True, False  # the other floats (long: unrolled by two)


def _splits(K: int, BK: int, group: int, split: int) -> bool:
    """Whether K's slices can be halved again: whole k steps, at least four of them, and whole
    groups (or a part of one group)."""
    half = K // (2 * split)
    return K % (2 * split * BK) == 0 and half >= 4 * BK and half % group in (0, half)


def choose_config(M: int, N: int, K: int, bits: int, group: int, wtype: Any = None) -> dict:
    """Tile sizes for one call, chosen by measurement on an H100 (benchmarks/NOTES.md, "Session
    10" and "Session 11") and the H200 (sessions 14 and 17). Decode (M <= 16): 4 warps of two
    16-row weight tiles each (128 channels a block; one tile, 64 channels, when that leaves SMs
    idle), tokens padded to 8 or 16, K split until the blocks number about 200 (400 with one
    tile; more for the types with long casts: `_decode_traits`; 4 slices for 1- and 2-bit
    weights whose tiles fill the SMs; the tile's last block adds the slices (`last_block`)
    where N's tiles do not fill the SMs, for 1- and 2-bit weights, and for 3-bit weights at
    up to 8 tokens; otherwise a reduction kernel does),
    scales applied to each group's f32 products where groups are whole k steps, zeros that are
    not codes in the cast subtracted after it (as products on X's group sums for weights of up
    to 4 bits at up to 8 tokens, and 3 bits). Larger M: 8 warps of one 16-row tile each, 256
    tokens (from M = 512; 128 from M = 65, else 64), k steps of 64, on wgmma with the weight
    from registers on sm_90a (one wgmma left in flight while the next step dequantizes:
    pipeline_copies); K split in two when the blocks would not cover the SMs. The decode loop
    unrolls its stages where the cast is short (integers, float4, float8 on 3 stages), else two
    steps: longer bodies unrolled by four overflowed the instruction cache (float6_e3m2: 96 ->
    134 us, session 11).
    The k steps' tiles move by TMA on sm_90a (one load per tile and stage; cp.async for 1- and
    2-bit weights at decode, whose small tiles TMA made 7-15% slower on the H200:
    benchmarks/NOTES.md, session 15). `wtype`: the weight type."""
    if M > 16:
        BM = 256 if M >= 512 else 128 if M > 64 else 64
        cfg = dict(BM=BM, warps=8, rows=1, BK=64, stages=4 if BM == 256 else 3, split=1)
        while N % (16 * cfg["warps"]):
            cfg["warps"] //= 2
        blocks = N // (16 * cfg["warps"]) * -(-M // BM)
        if blocks < SMS and K % (2 * 64) == 0 and (K // 2) % group in (0, K // 2):
            cfg["split"] = 2
        return cfg
    factor, stages, two, short = _decode_traits(bits, wtype, N)
    BM = 8 if M <= 8 else 16
    warps, rows, BK = 4, 2 if N // 128 >= SMS and two else 1, 128
    while N % (16 * warps * rows):
        rows, warps = (rows // 2, warps) if rows > 1 else (rows, warps // 2)
    while K % BK:
        BK //= 2
    split, blocks = 1, N // (16 * warps * rows)
    enough = 200 if rows == 2 else 400
    while blocks * split < enough * (factor if split < 8 else 1) and _splits(K, BK, group, split):
        split *= 2
    if bits <= 2 and N // 128 >= SMS:  # 1- and 2-bit weights whose tiles fill the SMs: 4
        # slices (28672 and 57344 x 8192, M = 1 / 16, uint1: 34.8 -> 31.9 / 41.6 -> 39.7 us,
        # 60.8 -> 55.7 / 76.1 -> 70.4; 2 slices at 28672 were slower, 36.0 / 44.2: session 27)
        while split < 4 and _splits(K, BK, group, split):
            split *= 2
    KS = K // split  # scales multiply each group's products when groups are whole k steps
    acc_scale = group % BK == 0 and (KS % group == 0 or group == K)
    # the slices added by the tile's last block (one launch) where N's tiles do not fill the
    # SMs, so K is split to fill them (8192 x 8192, M = 1: uint4 19.0 -> 17.0 us, 1024 x 8192
    # 10.0 -> 8.2); with N's tiles filling them (28672 x 8192, the 3- and 5-bit types' 4-8
    # slices) the blocks' ordered counts cost more than the second kernel (session 19)
    # Since the count is one atom.acq_rel (session 29), 1- and 2-bit weights take the last
    # block at every M (28672 x 8192, M = 16, us, second kernel -> last block: uint1 37.4 ->
    # 35.2, uint2 39.3 -> 38.1, int2 39.2 -> 38.2; 57344: 65.0 -> 61.7, 69.5 -> 68.4, 68.8 ->
    # 67.8), 3-bit weights at up to 8 tokens (M = 1: uint3 37.8 -> 36.6, 57344 63.5 -> 62.5;
    # M = 8 40.2 both); not uint3 at 16 tokens (45.4 -> 47.6) nor uint5 (M = 1 53.1 -> 52.8,
    # M = 8 54.8 -> 56.5)
    last = split > 1 and (N // 128 < SMS or bits <= 2 or (bits == 3 and M <= 8))
    # zeros that are not codes in the cast (uint5, uint8, zeros that are not whole numbers): X's
    # group sums on a ones tile for weights of up to 4 bits at up to 8 tokens and for 3 bits
    # (split 8) at 16; else the subtraction after the cast (28672 x 8192, M = 1 / 16, us,
    # products / subtraction: uint5 55.6 / 62.9 -> 53.6 / 60.5, uint8 66.0 / 69.6 -> 63.2 /
    # 65.1, uint7 62.1 -> 60.0 at 16; uint1 35.6 against 38.7 at 1, 47.4 against 44.6 at 16;
    # uint3 39.1 / 49.6 against 51.5 / 59.4: session 25, benchmarks/NOTES.md)
    products = (bits <= 4 and M <= 8) or bits == 3
    return dict(BM=BM, warps=warps, rows=rows, BK=BK, stages=stages, split=split,
                acc_scale=acc_scale, unroll=stages if short else 2, tma=bits > 2,
                last_block=last, zero_products=products)


class PlanKey(NamedTuple):
    """What a call's plan depends on (`_prepare` makes it; `_plan` plans for it)."""

    M: int
    N: int
    K: int
    wtype: str
    xtype: str
    bits: int
    group: int
    zero: float  # the constant zero (a uniform zero, else the zero point; 0 with zeros)
    has_zeros: bool
    has_bias: bool
    codes: bool  # the zeros as codes in the cast (`zero_codes`)
    fold: bool  # `fold_scales` at prefill
    shift: int  # `scale_shift`
    config: tuple | None  # the caller's overrides, sorted items
    switches: tuple
    target: Any


#: PlanKey -> (kernel, reducer or None, split, whether the kernel takes its scales and zeros
#: transposed: qmm_kernel's `step_scales`)
_PLANS: dict = {}
_CHECKS: Any = None  # QuantizedWeight -> {check: (stamp, result)} (`_checked`)
_CALLS: Any = None  # QuantizedWeight -> {(M, x dtype, bias?, switches): prepared} (`quant_matmul`)
CALLS_PER_WEIGHT = 16  # prepared calls kept per weight


def _checked(qweight: Any, what: str, tensor: Any, check, also: Any = None) -> Any:
    """`check(tensor)` for this weight, cached (one device sync per weight) until `tensor`
    changes in place (its version and address are the stamp), or until `also` (another tensor
    the check reads, or None) does."""
    import weakref

    global _CHECKS
    if _CHECKS is None:
        _CHECKS = weakref.WeakKeyDictionary()
    stamp = (what, tensor._version, tensor.data_ptr(),
             None if also is None else (also._version, also.data_ptr()))
    seen = _CHECKS.setdefault(qweight, {})
    hit = seen.get(what)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    value = check(tensor)
    seen[what] = (stamp, value)
    return value


def zero_codes(qweight: Any) -> Any:
    """`qweight.zeros` as uint8 codes when the weight type is uint1, uint2, uint3, uint4, uint6,
    uint7 or uint8 and every zero is a whole number in [0, 2^bits) (as `quantize` makes them):
    the kernel then subtracts them inside the fast cast, for free (qmm_kernel's `zero_codes`);
    else None. Checked once per weight (one device sync) and again when its zeros change in
    place."""
    import torch

    t = resolve(qweight.dtype)
    if t.kind != "uint" or plane_bits(t) is not None:
        return None

    def codes(z: Any) -> Any:
        whole = bool(((z == z.round()) & (z >= 0) & (z < (1 << t.bits))).all())
        return z.to(torch.uint8).contiguous() if whole else None

    return _checked(qweight, "zero codes", qweight.zeros, codes)


def uniform_zero(qweight: Any) -> float | None:
    """The zero every group of `qweight` has, where they all have the same, else None
    (asymmetric floats: 0; uint1 as `quantize` stores it: 0; uint2: 1, unless one side of a
    group's range [lo, hi] is under a fifth of the other). A call then runs the kernel of a
    weight without zeros and that constant zero, which the cast subtracts for free: no zeros
    to load, no subtrahends built from them (uint1 at 28672 x 8192, M = 1 / 16, H200: 31.3 ->
    27.5 / 40.0 -> 36.4 us; benchmarks/NOTES.md, session 27). Checked once per weight (one
    device sync; again when the zeros change in place)."""
    if qweight.zeros is None:
        return None

    def common(z: Any) -> float | None:
        v = z.reshape(-1)[0]
        return float(v.item()) if bool((z == v).all().item()) else None

    return _checked(qweight, "uniform zero", qweight.zeros, common)


def codes_in_cast(dtype: Any, M: int, xtype: str) -> bool:
    """Whether a call with M tokens of `xtype` takes an asymmetric `dtype` weight's zeros as
    codes the fast cast subtracts (where `zero_codes` finds them whole). 8-bit zero codes at
    decode measured slower (74 -> 106 us at M = 1, session 16); to bf16 the fused cast takes 1-,
    2- and 4-bit codes, and 3-, 6- and 7-bit codes in bytes; 1- and 2-bit codes at prefill were
    0.3-1% slower than q s - z s (session 25)."""
    t = resolve(dtype)
    narrow = t.bits in (1, 2)
    return (narrow and M <= 16) or t.bits == 4 or in_bytes(t) \
        or (M > 16 and xtype == "float16" and not narrow)


def fold_scales(qweight: Any, xtype: str) -> bool:
    """Whether the prefill kernel may take float codes times 2^-h and the scales times 2^h
    (qmm_kernel's `fold_scales`, h = DataType.f16_headroom: the fast cast's multiply gone):
    float weights without zeros (or with zeros all 0: `uniform_zero`) to f16 whose every scale
    times 2^h is finite in f16 (then exact: the products are the same numbers). Checked once
    per weight."""
    h = resolve(qweight.dtype).f16_headroom if resolve(xtype).name == "float16" else 0
    zeros = qweight.zeros is not None and uniform_zero(qweight) != 0
    if not h or zeros or qweight.zero_point != 0:
        return False
    return _checked(qweight, "fold scales", qweight.scales,
                    lambda s: bool((s.float().abs().amax() * 2.0 ** h <= 65504).item()))


def scale_shift(qweight: Any, xtype: str) -> int:
    """The power of two e the kernel's scales are multiplied by (its sums then by 2^-e, both
    exact): 0 unless bfloat16 scales meet float16 activations and some nonzero scale lies
    outside f16's normal range [2^-14, 65504], which f16 would round (a subnormal keeps fewer
    bits: float8_e5m2's scales, absmax / 57344, mostly are) or overflow. Then the largest e
    whose dequantized weights (q - z) s 2^e stay finite in f16 (the prefill kernel makes them).
    Refused (TC321) where the smallest nonzero scale is still an f16 subnormal there, or a
    scale is not finite. Checked once per weight (again when its scales or zeros change)."""
    if xtype != "float16" or str(qweight.scales.dtype) != "torch.bfloat16":
        return 0

    import math

    def shift(s: Any) -> int | str:
        a = s.double().abs()
        if not bool(a.isfinite().all()):
            return "a scale is not finite"
        nonzero = a[a > 0]
        if nonzero.numel() == 0:
            return 0
        lo, hi = float(nonzero.min()), float(nonzero.max())
        if lo >= 2.0 ** -14 and hi <= 65504:
            return 0
        z = qweight.zeros
        zlo, zhi = ((float(z.double().min()), float(z.double().max())) if z is not None
                    else (qweight.zero_point, qweight.zero_point))
        dt = resolve(qweight.dtype)  # (the largest |q - z| over the codes and the zeros)
        span = max(abs(float(v) - w) for v in (dt.min, dt.max) for w in (zlo, zhi))
        e = math.floor(math.log2(65504 / (hi * max(span, 1.0))))
        if lo * 2.0 ** e < 2.0 ** -14:
            return (f"its scales span {lo:.3g} to {hi:.3g}: no power of two puts the smallest "
                    f"in float16's normal range and keeps the largest weights finite")
        return e

    e = _checked(qweight, "scale shift", qweight.scales, shift, also=qweight.zeros)
    if isinstance(e, str):
        from tilecraft.quant.quantized import refuse

        raise refuse(
            "quant.matmul", f"the weight's bfloat16 scales cannot meet float16 activations "
            f"exactly: {e}", "pass bfloat16 activations, or quantize with "
            "scale_dtype=\"float16\" (an older quantize gave all-zero groups scale 1: "
            "quantizing again narrows the scales)")
    return e


def _plan(key: PlanKey, config: dict | None) -> tuple:
    from tilecraft.options import switch_on
    from tilecraft.quant.qmm_kernel import qmm_kernel, qmm_reduce

    M, N, K, wtype, xtype, bits, group, zero, has_zeros, has_bias, codes, fold, shift = \
        key[:13]
    cfg = dict(choose_config(M, N, K, bits, group, wtype), **(config or {}))
    cfg.pop("scale_shift", None)  # (the weight's, never a caller's: S is converted to match)
    if shift:
        cfg["scale_shift"] = shift
    if codes:
        cfg["zero_codes"] = True
    tma_on = cfg.get("tma") and key.target.has_tma and switch_on(key.switches, "tma")
    if has_zeros and bits in (4, 5) and cfg.get("acc_scale") and tma_on and cfg["split"] == 1 \
            and cfg["BK"] == group and "step_scales" not in (config or {}) \
            and (M > 8 or N // 128 < 2 * SMS):
        # (the zeros made the slice's up-front prologue 24-32 KB a block; at 28672 x 8192, M =
        # 1 / 16, three runs: uint4 0.3-0.9 / 1.6-1.8 us faster, uint5 0.1-2.7 / 0.1-1.1; uint3,
        # uint6, uint8 within +-1 us; symmetric types 0.7-1.7 slower, uint1 / uint2 (cp.async)
        # 2-4: session 26. At 57344 x 8192, uint4, M = 1 / 8 / 16: 66.7 -> 68.8 / 67.6 -> 69.2
        # / 83.6 -> 76.9 us, uint5 within 0.1: not at up to 8 tokens there, session 27)
        cfg["step_scales"] = True
    if M <= 16 and "stages" not in (config or {}):  # the grid in one wave (quant/waves.py)
        from tilecraft.quant.waves import one_wave_stages

        def with_stages(s: int) -> dict:  # (unrolled by the stages unless the caller said)
            own = cfg.get("unroll") == cfg["stages"] and "unroll" not in (config or {})
            return dict(cfg, stages=s, unroll=s if own else cfg.get("unroll"))

        def registers(s: int) -> int:
            """The kernel's, built (or loaded from the jit's cache); without NVRTC (a CPU
            interpreter run) too many for any block to fit: the stages stay."""
            from tilecraft.runtime.errors import CudaToolkitNotFoundError

            try:
                return qmm_kernel(M, N, K, wtype, xtype, group, zero, has_zeros, has_bias,
                                  **with_stages(s)).resources.registers
            except CudaToolkitNotFoundError:
                return 1 << 16

        cfg = with_stages(one_wave_stages(cfg, M, N, K, bits, group, xtype, has_zeros, codes,
                                          key.target, registers))
    if fold and not cfg.get("acc_scale"):  # (acc_scale folds 2^h into the f32 products)
        cfg.setdefault("fold_scales", True)  # (unless the caller's config says otherwise)
    kernel = qmm_kernel(M, N, K, wtype, xtype, group, zero, has_zeros, has_bias, **cfg)
    split = cfg["split"] if not cfg.get("cluster") else 1  # (P's slices)
    reducer = qmm_reduce(M, N, split, xtype, has_bias) \
        if split > 1 and not cfg.get("last_block") else None
    _PLANS[key] = plan = (kernel, reducer, split, bool(cfg.get("step_scales")))
    return plan


def _stamp(qweight: Any) -> tuple:
    """What a call's prepared arguments depend on: the weight's tensors (the objects, which the
    entry keeps alive, so a replaced one is never mistaken for them) and their versions."""
    z = qweight.zeros
    return (qweight.packed, qweight.scales, z, qweight.scales._version,
            None if z is None else z._version)


def _unchanged(old: tuple, new: tuple) -> bool:
    return all(a is b for a, b in zip(old[:3], new[:3])) and old[3:] == new[3:]


def quant_matmul(x: Any, qweight: Any, bias: Any = None, config: dict | None = None) -> Any:
    """x (M, K) @ dequant(qweight).T (+ bias) -> (M, N) in x's dtype, by the template
    (qmm_kernel.py): `x` contiguous f16/bf16, `qweight` a QuantizedWeight, `bias` (N,) or
    None (checked by the caller, tilecraft.quant.matmul). `config` overrides tile sizes.
    A call like an earlier one on the same weight (M, x's dtype, a bias or not, the switches)
    reuses its plan and converted arguments while the weight's tensors are unchanged (`_stamp`):
    the host path at decode is then two allocations and the launches."""
    from tilecraft.options import switches_from_env

    global _CALLS
    M = x.shape[0]
    how = (M, x.dtype, bias is None, switches_from_env())
    calls = None
    if config is None:
        if _CALLS is None:
            import weakref

            _CALLS = weakref.WeakKeyDictionary()
        calls = _CALLS.setdefault(qweight, {})
        hit = calls.get(how)
        if hit is not None and _unchanged(hit[0], _stamp(qweight)):
            return _launch(x, bias, *hit[2:])
    stamp = _stamp(qweight)
    by_group, prepared = _prepare(x, qweight, bias is not None, config, how[3])
    if calls is not None:  # (one converted copy of the scales and zeros per x dtype, shared)
        same = [e for h, e in calls.items() if h[1] == x.dtype and _unchanged(e[0], stamp)
                and e[1] == by_group]  # (laid out alike: (N, G) or (G, N), equal when N = G)
        if same:  # (zeros: the same kind too, codes or values)
            s, z, b0 = same[0][6:]
            z = z if z.dtype == prepared[5].dtype else prepared[5]
            prepared = (*prepared[:4], s, z, b0)
        while len(calls) >= CALLS_PER_WEIGHT:  # (the oldest first: M values come and go)
            calls.pop(next(iter(calls)))
        calls[how] = (stamp, by_group, *prepared)
    return _launch(x, bias, *prepared)


def _launch(x: Any, bias: Any, kernel: Any, reducer: Any, split: int, w: Any, s: Any, z: Any,
            b0: Any) -> Any:
    import torch

    M, N = x.shape[0], b0.shape[0]
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    p = torch.empty((split, M, N) if split > 1 else (1, 1, 1), dtype=torch.float32,
                    device=x.device)
    b = bias.to(x.dtype).contiguous() if bias is not None else b0  # (b0: unread without bias)
    if split == 1 or reducer is not None:
        c = _NO_COUNTS.get(x.device)
        kernel(x, w, s, z, b, y, p, c if c is not None else _no_counts(x.device))
        if reducer is not None:
            reducer(p, b, y)
        return y
    shape = kernel.func.params[-1].shape
    if x.device.type != "cuda" or torch.cuda.is_current_stream_capturing():
        # the interpreter (host threads would share counts), or a CUDA graph being captured:
        # zeros of their own (in a graph, set again by every replay)
        kernel(x, w, s, z, b, y, p, torch.zeros(shape, dtype=torch.int32, device=x.device))
        return y
    key = (kernel, x.device, torch.cuda.current_stream(x.device).cuda_stream)
    counts = _COUNTS.get(key)
    if counts is None:  # zero once: every call's last blocks set them back to zero
        counts = _COUNTS[key] = torch.zeros(shape, dtype=torch.int32, device=x.device)
    try:
        kernel(x, w, s, z, b, y, p, counts)
    except BaseException:  # (a call that stopped part way may leave counts behind)
        _COUNTS.pop(key, None)
        raise
    return y


#: (kernel, device, stream) -> the arrival counts of its tiles (qmm_kernel's `last_block`):
#: one array per stream, so that calls on different streams never share one (kernels on one
#: stream run one after another; eager calls only: a graph capture takes its own)
_COUNTS: dict = {}
_NO_COUNTS: dict = {}  # device -> the (1, 1) counts a kernel without them takes


def _no_counts(device: Any) -> Any:
    import torch

    _NO_COUNTS[device] = c = torch.zeros(1, 1, dtype=torch.int32, device=device)
    return c


def _prepare(x: Any, qweight: Any, has_bias: bool, config: dict | None, switches: tuple) -> tuple:
    """(whether the scales and zeros are transposed, (kernel, reducer or None, split, packed
    weight, scales, zeros, bias placeholder)) of a call: the plan for its shapes and options,
    and the weight's tensors as the kernel takes them."""
    import torch

    from tilecraft.targets import current_target

    M, K = x.shape
    N = qweight.shape[0]
    uniform = uniform_zero(qweight)  # (a zero common to every group: a constant)
    has_zeros = qweight.zeros is not None and uniform is None
    xtype = "bfloat16" if x.dtype == torch.bfloat16 else "float16"
    fused = has_zeros and codes_in_cast(qweight.dtype, M, xtype)
    codes = zero_codes(qweight) if fused else None
    shift = scale_shift(qweight, xtype)
    fold = M > 16 and not shift and fold_scales(qweight, xtype)
    key = PlanKey(M, N, K, qweight.dtype, xtype, qweight.bits, qweight.group_size,
                  uniform if uniform is not None else 0 if has_zeros else qweight.zero_point,
                  has_zeros, has_bias, codes is not None, fold, shift,
                  tuple(sorted(config.items())) if config else None, switches,
                  current_target())
    kernel, reducer, split, by_group = _PLANS.get(key) or _plan(key, config)

    def laid(t: Any) -> Any:  # ((N, G), or (G, N) for a kernel that takes a group a k step)
        return (t.t() if by_group else t).contiguous()

    s = qweight.scales if not shift else qweight.scales.float() * 2.0 ** shift
    s = laid(s.to(x.dtype))
    z = laid(codes) if codes is not None else laid(qweight.zeros.to(x.dtype)) if has_zeros \
        else s
    return by_group, (kernel, reducer, split, qweight.packed.view(N // 16, -1), s, z,
                      s.view(-1)[:N])

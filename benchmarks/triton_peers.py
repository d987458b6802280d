"""Triton peers for benchmarks/gemm.py and benchmarks/attention.py: the same ops, written in Triton.

They give the benchmarks a third column beside cuBLAS and SDPA: a tile-language compiler that is
not a vendor library. Importing this module needs `triton`; the benchmarks treat an ImportError
as "no Triton column". Neither kernel is part of tilecraft, and CI does not install Triton.

GEMM (`matmul`), C[M, N] = A[M, K] @ B[K, N], fp16 in, fp32 accumulate, fp16 out, both operands
row-major. One program computes one BLOCK_M x BLOCK_N tile of C by stepping along K in BLOCK_K
slices, each slice a `tl.dot` of an A panel with a B panel. Programs are numbered so that
GROUP_M consecutive tile-rows are swept column by column: programs that run at the same time
then read the same few A panels and B panels, which stay in L2.

    tile-rows 0..GROUP_M-1:   pid 0 -> (0, 0), 1 -> (1, 0), ..., GROUP_M -> (0, 1), ...
    tile-rows GROUP_M..:      continue after the first band is done

Attention forward (`attention`), O = softmax(Q K^T / sqrt(d)) V per (batch, head), tensors
[batch, heads, seq, dim] contiguous fp16. One program owns BLOCK_M query rows and visits the keys
in BLOCK_N blocks, keeping in fp32 a running row max m, a running row sum l and an unnormalised
output acc (online softmax). For each key block, with scores s = q k^T * scale * log2(e):

    m_new = max(m, rowmax(s));  p = 2^(s - m_new);  alpha = 2^(m - m_new)
    l = l * alpha + rowsum(p);  acc = acc * alpha + p @ v;  m = m_new

and at the end O = acc / l. Causal attention visits only key blocks at or left of the diagonal:
blocks wholly left of it need no mask, so they run in a first, unmasked stage; the BLOCK_M/BLOCK_N
blocks that the diagonal crosses run in a second stage that masks keys after the query.

Both wrappers autotune over a short list of configs known to do well on H100 (the pick is
`gemm_autotuned.best_config` / `attention_autotuned.best_config` after the first call);
`config=` runs one given config instead (benchmarks/check_triton_peers.py checks each that way).
Under TRITON_INTERPRET=1 the same kernels run on CPU tensors.
"""

import math

import torch
import triton
import triton.language as tl


def describe(config: triton.Config) -> str:
    """A config in one short line: its block sizes, warps and stages."""
    blocks = "x".join(str(v) for k, v in config.kwargs.items() if k.startswith("BLOCK"))
    return f"{blocks} warps {config.num_warps} stages {config.num_stages}"


# ---------------------------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------------------------

GROUP_M = 8  # tile-rows per band of the program order; not tuned

GEMM_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_stages=4, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_stages=4, num_warps=8),
]


@triton.jit
def _gemm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    # Map the linear program id to a (tile-row, tile-column) pair, band by band (see docstring).
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    programs_per_band = GROUP_M * tiles_n
    band_first_row = (pid // programs_per_band) * GROUP_M
    band_rows = tl.minimum(tiles_m - band_first_row, GROUP_M)  # the last band may be short
    pid_in_band = pid % programs_per_band
    tile_m = band_first_row + pid_in_band % band_rows
    tile_n = pid_in_band // band_rows

    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * K + ks[None, :]  # [BLOCK_M, BLOCK_K] of A
    b_tile = b_ptr + ks[:, None] * N + cols[None, :]  # [BLOCK_K, BLOCK_N] of B

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = ks < K - k0
        a = tl.load(a_tile, mask=(rows[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_tile, mask=k_ok[:, None] & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K * N

    c_tile = c_ptr + rows[:, None] * N + cols[None, :]
    tl.store(c_tile, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


gemm_autotuned = triton.autotune(configs=GEMM_CONFIGS, key=["M", "N", "K"])(_gemm_kernel)


def matmul(a: torch.Tensor, b: torch.Tensor, config: triton.Config | None = None) -> torch.Tensor:
    """Return a @ b (fp16) for row-major fp16 a [M, K] and b [K, N]; autotuned unless `config`."""
    assert a.dtype == b.dtype == torch.float16 and a.is_contiguous() and b.is_contiguous()
    (M, K), (K2, N) = a.shape, b.shape
    assert K == K2, f"inner dimensions differ: {K} vs {K2}"
    c = torch.empty(M, N, dtype=torch.float16, device=a.device)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    if config is None:
        gemm_autotuned[grid](a, b, c, M, N, K, GROUP_M=GROUP_M)
    else:
        _gemm_kernel[grid](a, b, c, M, N, K, GROUP_M=GROUP_M, **config.all_kwargs())
    return c


# ---------------------------------------------------------------------------------------------
# Attention forward
# ---------------------------------------------------------------------------------------------

ATTENTION_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=3, num_warps=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_stages=2, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_stages=3, num_warps=8),
]


@triton.jit
def _attend_blocks(
    acc, m_i, l_i, q, k_ptr, v_ptr, rows, key_lo, key_hi, qk_scale,
    D: tl.constexpr, BLOCK_N: tl.constexpr, MASK_CAUSAL: tl.constexpr,
):  # fmt: skip
    """Fold keys [key_lo, key_hi) of one (batch, head) into the online-softmax state."""
    dims = tl.arange(0, D)
    for start in range(key_lo, key_hi, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + keys[:, None] * D + dims[None, :])  # [BLOCK_N, D]
        v = tl.load(v_ptr + keys[:, None] * D + dims[None, :])
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_M, BLOCK_N], log2 units
        if MASK_CAUSAL:
            s = tl.where(rows[:, None] >= keys[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, S, qk_scale,
    D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # Program (i, bh): query rows [i * BLOCK_M, (i + 1) * BLOCK_M) of flattened (batch, head) bh.
    first_row = tl.program_id(0) * BLOCK_M
    head_offset = tl.program_id(1).to(tl.int64) * S * D
    q_ptr += head_offset
    k_ptr += head_offset
    v_ptr += head_offset
    o_ptr += head_offset

    rows = first_row + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + dims[None, :])  # [BLOCK_M, D], loaded once
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)

    if CAUSAL:
        # Keys before first_row are visible to every row of the tile: no mask. Then the diagonal.
        acc, m_i, l_i = _attend_blocks(
            acc, m_i, l_i, q, k_ptr, v_ptr, rows, 0, first_row, qk_scale, D, BLOCK_N, False
        )
        diag_end = first_row + BLOCK_M
        acc, m_i, l_i = _attend_blocks(
            acc, m_i, l_i, q, k_ptr, v_ptr, rows, first_row, diag_end, qk_scale, D, BLOCK_N, True
        )
    else:
        acc, m_i, l_i = _attend_blocks(
            acc, m_i, l_i, q, k_ptr, v_ptr, rows, 0, S, qk_scale, D, BLOCK_N, False
        )

    out = acc / l_i[:, None]
    tl.store(o_ptr + rows[:, None] * D + dims[None, :], out.to(tl.float16))


attention_autotuned = triton.autotune(configs=ATTENTION_CONFIGS, key=["S", "D", "CAUSAL"])(
    _attention_kernel
)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
    config: triton.Config | None = None,
) -> torch.Tensor:  # fmt: skip
    """Softmax(q k^T / sqrt(d)) v for contiguous fp16 [batch, heads, seq, dim]; seq % 128 == 0."""
    assert q.shape == k.shape == v.shape and q.dtype == k.dtype == v.dtype == torch.float16
    assert q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    batch, heads, S, D = q.shape
    assert S % 128 == 0, f"seq {S} must be a multiple of 128 (the kernel does not mask rows)"
    o = torch.empty_like(q)
    qk_scale = 1.0 / math.sqrt(D) * math.log2(math.e)  # softmax scale, and exp -> exp2

    def grid(meta):
        return (S // meta["BLOCK_M"], batch * heads)

    if config is None:
        attention_autotuned[grid](q, k, v, o, S, qk_scale, D=D, CAUSAL=causal)
    else:
        _attention_kernel[grid](q, k, v, o, S, qk_scale, D=D, CAUSAL=causal, **config.all_kwargs())
    return o

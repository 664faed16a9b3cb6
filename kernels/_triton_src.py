"""Triton sources of the fused dense kernels (see :mod:`spector_gpu.kernels.fused`).

Plain functions (left unannotated: Triton reads a kernel's annotations, so the mypy ignores
below are deliberate), wrapped by :func:`spector_gpu.kernels.fused.kernels` with ``triton.jit`` on a
GPU or Triton's interpreter on the CPU (that is how CI tests them). Importing this module
needs Triton; nothing else imports it directly.
"""

import triton.language as tl


def blockmax_kernel(  # type: ignore[no-untyped-def]
    codes_ptr,
    q_ptr,
    cs_ptr,
    bias_ptr,
    out_ptr,
    n_rows,
    n_q,
    dim,
    stride_c,
    stride_q,
    stride_o,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Block maxima of the scaled dot products.

    ``out[b, j]`` = max over the BLOCK_M rows r of block b of
    ``float(codes[r] · q[j]) * cs[r] + bias[r]``.

    One program per (row block, query block); the query block varies fastest, so the row
    block's codes are read from memory once and from L2 for the other query blocks. The int32
    dot products never leave the chip: only the block maxima are written.
    """
    pid = tl.program_id(0)
    num_n = (n_q + BLOCK_N - 1) // BLOCK_N
    pid_m = pid // num_n
    pid_n = pid % num_n
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)  # rows × stride passes 2**31
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, dim, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            codes_ptr + rm[:, None] * stride_c + kk[None, :],
            mask=(rm[:, None] < n_rows) & (kk[None, :] < dim),
            other=0,
        )
        b = tl.load(
            q_ptr + rn[None, :] * stride_q + kk[:, None],
            mask=(rn[None, :] < n_q) & (kk[:, None] < dim),
            other=0,
        )
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    live = rm < n_rows
    cs = tl.load(cs_ptr + rm, mask=live, other=0.0)
    bias = tl.load(bias_ptr + rm, mask=live, other=float("-inf"))
    keys = acc.to(tl.float32) * cs[:, None] + bias[:, None]
    tl.store(out_ptr + pid_m.to(tl.int64) * stride_o + rn, tl.max(keys, axis=0), mask=rn < n_q)


def candidates_kernel(  # type: ignore[no-untyped-def]
    codes_ptr,
    q_ptr,
    cs_ptr,
    bias_ptr,
    blocks_ptr,
    out_ptr,
    n_rows,
    dim,
    stride_c,
    stride_q,
    n_sel,
    BLOCK: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Exact keys of the rows of selected blocks: program p scores block ``blocks[p]`` (its
    BLOCK rows) against query ``p // n_sel`` and writes ``out[p*BLOCK : (p+1)*BLOCK]``."""
    pid = tl.program_id(0)
    qi = pid // n_sel
    blk = tl.load(blocks_ptr + pid)
    rm = blk * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for k0 in range(0, dim, BLOCK_K):
        kk = k0 + rk
        a = tl.load(
            codes_ptr + rm[:, None] * stride_c + kk[None, :],
            mask=(rm[:, None] < n_rows) & (kk[None, :] < dim),
            other=0,
        )
        b = tl.load(q_ptr + qi.to(tl.int64) * stride_q + kk, mask=kk < dim, other=0)
        acc += tl.sum(a.to(tl.int32) * b.to(tl.int32)[None, :], axis=1)
    live = rm < n_rows
    cs = tl.load(cs_ptr + rm, mask=live, other=0.0)
    bias = tl.load(bias_ptr + rm, mask=live, other=float("-inf"))
    keys = acc.to(tl.float32) * cs + bias
    tl.store(out_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK), keys)

"""The CPU tile GEMMs (kernels/dense_cpu.py): int8 (``torch._int_mm``) and exact float32 BLAS
give the same results as the numpy reference; the batch's route by query count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from spector_gpu.kernels import dense_cpu
from spector_gpu.kernels.dense import NATIVE_SCAN_MAX, DenseIndex, search_reference
from spector_gpu.kernels.dense_cpu import F32_EXACT_DIM, forced_gemm, gemm_kind, tile_dots
from spector_gpu.kernels.native import native
from spector_gpu.kernels.quant import l2_normalize, quantize_int8

from spector_gpu.errors import ValidationError

KINDS = ["int8", "float32"]
KERNELS = ["torch", "native"] if native is not None else ["torch"]


def corpus(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = l2_normalize(rng.standard_normal((n, d)).astype(np.float32))
    x[10:20] = x[3]  # ties, to the lower slot
    q, s = quantize_int8(x)
    return x, q, s


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [7, 384])
def test_tile_loop_equals_reference_with_either_gemm(kind: str, kernel: str, d: int) -> None:
    """Batches past the native scan go through the tile loop: both GEMMs, both selections,
    several tiles (4,500 rows in tiles of 1,024 and chunks of 2,048), gated and not."""
    x, q, s = corpus(4500, d, d)
    rng = np.random.default_rng(1)
    queries = np.vstack([x[3], rng.standard_normal((20, d))]).astype(np.float32)
    index = DenseIndex(d, device="cpu", tile_rows=1024, cpu_kernel=kernel)  # type: ignore[arg-type]
    index.add(q, s)
    for allowed in (None, rng.random(4500) < 0.3):
        with forced_gemm(kind):
            got = index.search(queries, 15, allowed=allowed)
        want = search_reference(q, s, queries, 15, allowed)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("kind", KINDS)
def test_keys_all_without_the_native_scan_equals_the_integer_product(kind: str) -> None:
    x, q, s = corpus(700, 96, 5)
    index = DenseIndex(96, device="cpu", cpu_kernel="torch")
    index.add(q, s)
    dq = index.queries(x[:9])
    with forced_gemm(kind):
        got = index.keys_all(dq).numpy()
    want = (q.astype(np.int64) @ dq.xq.astype(np.int64).T).astype(np.float32) * s[:, None]
    np.testing.assert_array_equal(got, want.T)


def test_float32_dots_are_exact_at_the_largest_dimension_it_takes() -> None:
    """Every code at ±127 (the largest products) over F32_EXACT_DIM columns: the float32 sums
    still equal the integer dot products; one column more could round."""
    d = F32_EXACT_DIM
    assert d * 127 * 127 < 2**24 <= (d + 1) * 127 * 127
    gen = torch.Generator().manual_seed(0)
    part = torch.where(torch.rand((300, d), generator=gen) < 0.5, 127, -127).to(torch.int8)
    part[0] = 127
    xt = torch.full((d, 3), 127, dtype=torch.int8)
    xt[:, 1] = -127
    out = torch.empty((300, 3), dtype=torch.int32)
    conv = torch.empty((300, d), dtype=torch.float32)
    fbuf = torch.empty((300, 3), dtype=torch.float32)
    got = tile_dots(part, xt, xt.float(), out, conv, fbuf)
    want = part.to(torch.int64) @ xt.to(torch.int64)
    assert torch.equal(got.to(torch.int64), want)
    assert int(got[0, 0]) == d * 127 * 127


@pytest.mark.parametrize("units", [False, True])
def test_gemm_kind_is_a_rule_of_the_cpu_and_the_width(
    units: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """int8 where the CPU has INT8 matrix units or float32 sums would not be exact, else
    float32; forced_gemm overrides it only where float32 stays exact."""
    monkeypatch.setattr(dense_cpu, "int8_units", lambda: units)
    want = "int8" if units else "float32"
    assert gemm_kind(64) == gemm_kind(F32_EXACT_DIM) == want
    assert gemm_kind(F32_EXACT_DIM + 1) == "int8"
    with forced_gemm("int8"):
        assert gemm_kind(64) == "int8"
    with forced_gemm("float32"):
        assert gemm_kind(64) == "float32"
        assert gemm_kind(F32_EXACT_DIM + 1) == "int8"  # never an inexact float32 sum
    with pytest.raises(ValidationError, match="gemm kind"), forced_gemm("int4"):
        pass


def test_int8_units_reads_the_cpu_flags() -> None:
    assert isinstance(dense_cpu.int8_units(), bool)
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        assert dense_cpu.int8_units() is False
        return
    flags = {w for ln in text.splitlines() if ln.startswith("flags") for w in ln.split()}
    assert dense_cpu.int8_units() == bool(flags & {"avx512_vnni", "amx_int8"})


@pytest.mark.parametrize("n", [1, NATIVE_SCAN_MAX, NATIVE_SCAN_MAX + 1, 40])
def test_the_batch_route_follows_the_query_count(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to NATIVE_SCAN_MAX queries take the native scan, more the GEMM tiles, whose GEMMs
    run on one torch thread (the caller's count is restored after); results are the
    reference's either way, inside inference mode too (as recall calls it)."""
    x, q, s = corpus(3000, 41, 41)
    index = DenseIndex(41, device="cpu", tile_rows=512)
    index.add(q, s)
    threads: list[int] = []
    real = dense_cpu.tile_dots

    def spy(*args: Any) -> torch.Tensor:
        threads.append(torch.get_num_threads())
        return real(*args)

    monkeypatch.setattr(dense_cpu, "tile_dots", spy)
    queries = np.vstack([x[: n // 2], np.random.default_rng(n).standard_normal((n - n // 2, 41))])
    before = torch.get_num_threads()
    with torch.inference_mode():
        got = index.search(queries.astype(np.float32), 5)
    assert torch.get_num_threads() == before
    tiled = n > NATIVE_SCAN_MAX or native is None
    assert bool(threads) == tiled
    assert set(threads) <= {1}
    want = search_reference(q, s, queries.astype(np.float32), 5)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])

"""The per-memory columns recall reads, as tensors on the pathway's device.

Header fields (importance, flags, arousal) and strength columns (D at the last event, its
time, S) of every memory. On the CPU they are zero-copy views of the cortex columns, read
fresh at every recall. On a GPU they are device mirrors kept in step incrementally
(:class:`~.state.StoreVersion`): appended rows are uploaded, a change in place re-uploads, and
the rows the pathway's own onRecall rewrote are patched (:meth:`RecallColumns.patch`).

``s_term`` is the cognitive factor's ``min(max(S, 0)^0.3, 1e6)``, computed by numpy on the host
for the rows it covers (a gather on the CPU, each upload on a GPU), so both devices use the
same bits (a GPU ``pow`` may differ from the host's in the last place).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...cortex.cortex import Cortex
from ...kernels.decay import DecayLaw
from ...kernels.native import native
from ...kernels.sharing import share
from .state import StoreVersion

__all__ = ["PoolColumns", "RecallColumns", "host_columns", "s_term"]

_S_TERM_MAX = 1e6  # bound of S^0.3 (see fusion.cognitive_factor)
#: Pool members in a chunk of :meth:`RecallColumns.gather_host` worth a helper thread's start
#: (about 0.1 ms of the native pass and s_term; ``kernels/sharing.share``).
SHARE_MEMBERS = 8192


def s_term(storage: np.ndarray) -> np.ndarray:
    """float64 ``min(max(S, 0)^0.3, 1e6)`` of float32 S values."""
    return np.minimum(np.power(np.clip(storage.astype(np.float64), 0.0, None), 0.3), _S_TERM_MAX)


@dataclass(frozen=True)
class PoolColumns:
    """Columns gathered for a (m, W) block of ordinals; every tensor has that shape."""

    importance: torch.Tensor  # float32
    flags: torch.Tensor  # uint8
    arousal: torch.Tensor  # uint8
    d_event: torch.Tensor  # float32
    last_ms: torch.Tensor  # int64
    storage: torch.Tensor  # float32
    formed_ms: torch.Tensor  # int64: the memory's own timestamp_ms
    s_term: torch.Tensor  # float64


_FIELDS = ("importance", "flags", "arousal", "d_event", "last_ms", "storage", "formed_ms")
_NATIVE_ORDER = ("importance", "flags", "arousal", "formed_ms", "d_event", "last_ms", "storage")


def host_columns(cortex: Cortex) -> dict[str, np.ndarray]:
    """numpy views (strided for header fields) of every column over ``[0, n)``."""
    n = cortex.n
    h = cortex.cols.headers[:n]
    return {
        "importance": h["importance"],
        "flags": h["flags"],
        "arousal": h["arousal"],
        "d_event": cortex.cols.d_event[:n],
        "last_ms": cortex.cols.last_event_ms[:n],
        "storage": cortex.cols.storage[:n],
        "formed_ms": h["timestamp_ms"],
    }


class RecallColumns:
    """Columns on ``device``; ``mirror`` keeps device copies (forced on the CPU by the tests
    that run the GPU code path there)."""

    def __init__(self, device: torch.device, *, mirror: bool) -> None:
        self.device = device
        self.mirror = mirror
        self._at: StoreVersion | None = None
        self._cols: dict[str, torch.Tensor] = {}
        self._host: dict[str, np.ndarray] = {}
        self._cap = 0
        self._n = 0

    def sync(self, cortex: Cortex, now: StoreVersion) -> None:
        """Bring the columns up to the store at ``now``."""
        if not self.mirror:
            self._host = host_columns(cortex)
            self._cols = {k: torch.from_numpy(np.asarray(v)) for k, v in self._host.items()}
            self._n = cortex.n
            self._at = now
            return
        if self._at == now:
            return
        if self._at is not None and now.extends(self._at):
            self._upload(cortex, self._n, now.n)
        else:
            self._cap = 0
            self._upload(cortex, 0, now.n)
        self._at = now

    def _upload(self, cortex: Cortex, lo: int, hi: int) -> None:
        host = host_columns(cortex)
        if hi > self._cap:
            cap = max(hi, 2 * self._cap, 1024)
            grown = {}
            for name in (*_FIELDS, "s_term"):
                dtype = (
                    torch.float64 if name == "s_term" else torch.from_numpy(host[name][:0]).dtype
                )
                buf = torch.zeros(cap, dtype=dtype, device=self.device)
                if lo and name in self._cols:
                    buf[:lo] = self._cols[name][:lo]
                grown[name] = buf
            self._cols, self._cap = grown, cap
        self._write(host, np.arange(lo, hi))
        self._n = hi

    def _write(self, host: dict[str, np.ndarray], rows: np.ndarray) -> None:
        if not len(rows):
            return
        idx = torch.from_numpy(rows).to(self.device)
        for name in _FIELDS:
            values = np.ascontiguousarray(host[name][rows])
            self._cols[name][idx] = torch.from_numpy(values).to(self.device)
        self._cols["s_term"][idx] = torch.from_numpy(s_term(host["storage"][rows])).to(self.device)

    def patch(self, cortex: Cortex, rows: np.ndarray) -> None:
        """Re-read ``rows`` (int64 ordinals) after the pathway's own strength update."""
        if self.mirror and len(rows):
            self._write(host_columns(cortex), rows)

    def column(self, name: str) -> torch.Tensor:
        """One column over ``[0, n)`` on the device (``name`` in PoolColumns' fields but s_term)."""
        return self._cols[name][: self._n]

    def gather(self, idx: torch.Tensor) -> PoolColumns:
        """Columns at ordinals ``idx`` (int64, any shape, every value in ``[0, n)``)."""
        if self.mirror:
            got = {name: self._cols[name][idx] for name in _FIELDS}
            return PoolColumns(s_term=self._cols["s_term"][idx], **got)
        # numpy gathers from the strided header fields (torch's strided gather is slow; a
        # native pass reading each record once was no faster through recall: docs/architecture.md)
        at = idx.numpy()
        host = {name: self._host[name][at] for name in _FIELDS}
        got = {name: torch.from_numpy(v) for name, v in host.items()}
        return PoolColumns(s_term=torch.from_numpy(s_term(host["storage"])), **got)

    def gather_host(
        self, idx: torch.Tensor, law: DecayLaw, now_ms: int
    ) -> tuple[PoolColumns, torch.Tensor] | None:
        """:meth:`gather` and the members' D now (float64, ``decayed_numpy``'s bits) in one
        native pass that reads each member's record once (in chunks shared with the helper
        threads); None where that pass does not apply (a device mirror, or no native build):
        the caller gathers and decays apart."""
        if self.mirror or native is None:
            return None
        at = np.ascontiguousarray(idx.numpy()).reshape(-1)
        h = self._host
        out = {name: np.empty(at.shape[0], dtype=h[name].dtype) for name in _FIELDS}
        d_now, terms = np.empty(at.shape[0]), np.empty(at.shape[0])

        def run(lo: int, hi: int) -> None:
            native.pool_columns(
                self._n, now_ms, at[lo:hi],
                *(h[name] for name in _NATIVE_ORDER),
                law.freeze_set, law.need_set, law.edges, law.factors,
                *(out[name][lo:hi] for name in _NATIVE_ORDER), d_now[lo:hi],
            )  # fmt: skip
            terms[lo:hi] = s_term(out["storage"][lo:hi])

        share(at.shape[0], SHARE_MEMBERS, run)  # independent members: chunks for the helpers
        got = {name: torch.from_numpy(v.reshape(idx.shape)) for name, v in out.items()}
        terms_t = torch.from_numpy(terms.reshape(idx.shape))
        return PoolColumns(s_term=terms_t, **got), torch.from_numpy(d_now.reshape(idx.shape))

"""The lifecycle columns (:class:`spector_gpu.cortex.attributes.Attributes`): a batch appended
at once holds what the same payloads appended one at a time hold, column by column."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from spector_gpu.cortex.attributes import Attributes
from spector_gpu.cortex.payload import Payload, decode_payload, encode_payload
from spector_gpu.errors import CorruptionError

COLUMNS = (
    *("user", "agent", "run", "namespace", "kind", "confidence", "supersedes", "created"),
    *("updated", "version", "unindexed"),
)


def _payload(rng: random.Random, i: int) -> Payload:
    def maybe(value: object) -> object:
        return value if rng.random() < 0.5 else None

    return Payload(
        text=f"memory {i}",
        external_id=maybe(f"ext{rng.randint(0, 5)}"),  # type: ignore[arg-type]
        user_id=maybe(rng.choice(["ann", "bo"])),  # type: ignore[arg-type]
        agent_id=maybe("planner"),  # type: ignore[arg-type]
        run_id=maybe(f"run{rng.randint(0, 2)}"),  # type: ignore[arg-type]
        namespace=tuple(rng.sample(["team", "eu", "notes"], rng.randint(0, 2))),
        kind=maybe(rng.randint(1, 4)),  # type: ignore[arg-type]
        confidence=maybe(rng.random()),  # type: ignore[arg-type]
        created_ms=maybe(1_700_000_000_000 + i),  # type: ignore[arg-type]
        updated_ms=maybe(1_700_000_000_500 + i),  # type: ignore[arg-type]
        version=rng.randint(1, 3),
        supersedes=maybe(rng.randint(1, 1 << 62)),  # type: ignore[arg-type]
        indexed=rng.random() < 0.8,
        metadata=maybe({"n": i}),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_batch_holds_what_rows_appended_one_by_one_hold(seed: int) -> None:
    rng = random.Random(seed)
    payloads = [_payload(rng, i) for i in range(rng.randint(0, 60))]
    batch, single = Attributes(), Attributes()
    batch.append(payloads[:3])  # an earlier batch: the codes and rows continue from it
    batch.append(payloads[3:])
    for p in payloads:
        single.append([p])
    assert len(batch) == len(single) == len(payloads)
    assert batch.names == single.names
    for name in COLUMNS:
        got, want = batch.column(name), single.column(name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    for i, p in enumerate(payloads):
        assert batch.column("version")[i] == p.version
        assert batch.column("unindexed")[i] == (0 if p.indexed else 1)
        conf = batch.column("confidence")[i]
        assert math.isnan(conf) if p.confidence is None else conf == np.float32(p.confidence)
        assert batch.name(int(batch.column("user")[i])) == p.user_id
        if p.external_id is not None:
            key = (p.user_id, p.agent_id, p.run_id, p.external_id)
            assert batch.keyed(key) == single.keyed(key)
        if p.supersedes:
            assert i in batch.successors(p.supersedes)


def test_further_superseded_memories_survive_the_snapshot() -> None:
    p = Payload(text="Ann has 4 cats", supersedes=11, also_supersedes=(12, 13))
    assert decode_payload(encode_payload(p)) == p  # payload field 23 round-trips
    a = Attributes()
    a.append([Payload(text="x"), p])
    assert [a.successors(t) for t in (11, 12, 13)] == [[1], [1], [1]]
    rows, tsids = a.also_pairs()
    assert rows.tolist() == [1, 1] and tsids.tolist() == [12, 13]
    state = a.state()
    back = Attributes.from_state(state, 2, [None, None], "snap")
    assert back.also_pairs()[1].tolist() == [12, 13] and back.successors(13) == [1]
    old = {k: v for k, v in state.items() if not k.startswith("also.")}  # before the pairs
    assert Attributes.from_state(old, 2, [None, None], "snap").also_pairs()[0].size == 0
    with pytest.raises(CorruptionError, match="also"):
        Attributes.from_state({**state, "also.rows": np.array([5, 1])}, 2, [None, None], "snap")

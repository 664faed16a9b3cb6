"""Switching from mem0: the same calls, one import changed (no LLM, no API key, no mem0).

Run: ``python examples/mem0_switch.py [STORE_DIR]``.
"""

from __future__ import annotations

import json
import sys
import tempfile

from spector_gpu.integrations.mem0 import Memory  # was: from mem0 import Memory


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="mem0-switch-")
    config = {"vector_store": {"provider": "spector_gpu", "config": {"path": path}}}
    with Memory.from_config(config) as m:
        chat = [
            {"role": "user", "content": "I moved to Lisbon in May", "name": "Ann"},
            {"role": "assistant", "content": "How do you like it?"},
        ]
        added = m.add(chat, user_id="ann", metadata={"topic": "moving"}, infer=False)
        mid = added["results"][0]["id"]
        m.update(mid, text="I moved to Porto in June", metadata={"year": 2026})
        hits = m.search("where did I move to?", filters={"user_id": "ann"}, top_k=1)
        print(json.dumps(hits, indent=1))
        print([e["event"] for e in m.history(mid)])
        m.delete_all(user_id="ann")
        print(m.get_all(filters={"user_id": "ann"}))


if __name__ == "__main__":
    main()

"""A LangGraph agent that remembers across threads (and across restarts) with SpectorStore.

Run: ``python examples/langgraph_agent.py [STORE_DIR]`` (needs ``pip install
'spector-gpu[langgraph]'``; offline: the "model" is a rule that answers from the memories).

Each conversation thread gets its own checkpoint, but the memories live in one spector_gpu
store under ``("memories", user)``, so a new thread, or a new process, recalls what an
earlier one was told.
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from spector_gpu.integrations.langgraph import SpectorStore


class State(TypedDict):
    user: str
    message: str
    reply: str


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Keep every statement the user makes (questions are not facts)."""
    if not state["message"].rstrip().endswith("?"):
        key = f"m{time.time_ns()}"
        store.put(("memories", state["user"]), key, {"text": state["message"]})
    return {}


def answer(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Answer with the memories that best match the message (the node must annotate
    ``store: BaseStore``: LangGraph injects the store by that annotation)."""
    hits = store.search(("memories", state["user"]), query=state["message"], limit=2)
    known = "; ".join(f"{h.value['text']} ({h.score:.2f})" for h in hits if h.score)
    return {"reply": f"I remember: {known}" if known else "Noted."}


def build(store: BaseStore) -> Any:
    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("answer", answer)
    g.add_edge(START, "remember")
    g.add_edge("remember", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=InMemorySaver(), store=store)


def chat(graph: Any, thread: str, user: str, message: str) -> None:
    out = graph.invoke(
        {"user": user, "message": message, "reply": ""},
        {"configurable": {"thread_id": thread}},
    )
    print(f"[{thread}] {user}: {message}\n[{thread}] agent: {out['reply']}")


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="lg-agent-")
    with SpectorStore(path) as store:
        graph = build(store)
        chat(graph, "monday", "ann", "I moved to Lisbon in May.")
        chat(graph, "monday", "ann", "My dog is called Pixel.")
        chat(graph, "tuesday", "ann", "Where do I live now?")  # another thread
        chat(graph, "tuesday", "bo", "Where do I live now?")  # another user: nothing
    with SpectorStore(path) as store:  # a new process would see the same
        chat(build(store), "friday", "ann", "What is my dog called?")
    print(f"store: {path}")


if __name__ == "__main__":
    main()

"""Integrations with other frameworks, each an optional extra imported on its own.

* :mod:`spector_gpu.integrations.langgraph` (extra ``langgraph``): ``SpectorStore``, a
  LangGraph ``BaseStore``.
* :mod:`spector_gpu.integrations.langchain` (extra ``langchain``): ``SpectorVectorStore``, a
  LangChain ``VectorStore`` (passes ``langchain-tests``' standard suite).
* :mod:`spector_gpu.integrations.mcp_server` (extra ``mcp``): an MCP server over stdio
  (``spector-gpu mcp --store DIR``).
* :mod:`spector_gpu.integrations.mem0` (extra ``mem0``, no package needed): ``Memory``,
  mem0's API without an LLM.
* :mod:`spector_gpu.integrations.ray` (extra ``ray``): batched recall as a Ray Data UDF.

Every adapter keeps no state of its own: everything lives in the store and its crash-safe
commits. Import the integration module itself; this package imports nothing, so no extra is
needed to load it, and a missing framework is a ``MissingExtraError`` naming the extra.
"""

__all__ = []

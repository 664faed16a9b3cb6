"""spector_gpu: a memory engine for AI agents."""

__all__: list[str] = []

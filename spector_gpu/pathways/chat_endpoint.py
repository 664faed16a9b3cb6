"""An OpenAI-compatible chat endpoint that answers in JSON (``spector-gpu[llm]``, httpx).

Any server that speaks ``POST {base_url}/chat/completions`` works: OpenAI, Ollama
(``http://localhost:11434/v1``), vLLM, llama.cpp's server. :class:`ChatEndpoint` sends one
request per call with ``temperature = 0`` and ``response_format = {"type": "json_object"}``,
reads ``choices[0].message.content`` as a JSON object (a fenced ```` ```json ```` block is
accepted) and hands it to a caller's validator. A connection failure, a timeout, an HTTP 429 or
5xx, or an answer that is not JSON or fails the validator is retried ``retries`` more times
(with a short back-off); other HTTP errors are not. When every attempt fails the call raises
:class:`~spector_gpu.errors.ModelEndpointError` naming the endpoint and the last problem, and the
caller writes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import checks
from ..config import LLMConfig
from ..errors import MissingExtraError, ModelEndpointError, ValidationError

__all__ = ["ChatEndpoint", "SchemaViolationError"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class SchemaViolationError(ValueError):
    """Raised by a validator: the answer is JSON but not the documented schema."""


@dataclass(frozen=True)
class ChatEndpoint:
    """Where and how to ask: ``base_url`` (up to ``/v1``), ``model``, the key (None: no
    ``Authorization`` header, as local servers need), ``timeout_s`` per request, ``retries``
    further attempts and ``backoff_s`` before the first retry (doubled each time)."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)  # never printed
    timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 0.5

    def __post_init__(self) -> None:
        checks.string(self.base_url, "llm.base_url")
        checks.string(self.model, "llm.model")
        if not self.base_url.startswith(("http://", "https://")) or not self.model:
            raise ValidationError(
                f"a chat endpoint needs an http(s) base_url and a model, got "
                f"base_url={self.base_url!r} model={self.model!r}; set [llm] base_url and model "
                "(or SPECTOR_LLM__BASE_URL / SPECTOR_LLM__MODEL)"
            )
        checks.number(self.timeout_s, "llm.timeout_s", lo=0.001, hi=None)
        checks.integer(self.retries, "llm.retries", lo=0, hi=10)
        checks.number(self.backoff_s, "llm.backoff_s", lo=0.0, hi=60.0)

    @classmethod
    def from_config(cls, cfg: LLMConfig) -> ChatEndpoint | None:
        """The endpoint ``cfg`` describes (key from the environment variable it names), or None
        when no model is configured (empty ``base_url`` or ``model``)."""
        if not cfg.base_url or not cfg.model:
            return None
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        return cls(cfg.base_url, cfg.model, key or None, cfg.timeout_s, cfg.retries)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def ask(self, messages: Sequence[Mapping[str, str]], validate: Callable[[Any], T]) -> T:
        """``validate(answer)`` of the endpoint's JSON answer to ``messages``; retried as the
        module docstring says, else :class:`ModelEndpointError`."""
        try:
            import httpx
        except ImportError as exc:
            raise MissingExtraError(
                "the language-model endpoint needs httpx; install the extra: "
                "pip install 'spector-gpu[llm]'"
            ) from exc
        body = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with httpx.Client(timeout=self.timeout_s) as client:
                    response = client.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException:
                problem = f"no answer within {self.timeout_s} s (raise [llm] timeout_s)"
                continue
            except httpx.HTTPError as exc:
                problem = f"the connection failed ({type(exc).__name__}: {exc})"
                continue
            if response.status_code == 429 or response.status_code >= 500:
                problem = f"HTTP {response.status_code}: {response.text[:200]!r}"
                continue
            if response.status_code >= 400:
                raise self._error(
                    f"HTTP {response.status_code}: {response.text[:200]!r} (check the model "
                    "name, the key and base_url)",
                    attempt + 1,
                )
            try:
                return validate(_content(response.text))
            except SchemaViolationError as exc:
                problem = f"an answer outside the schema: {exc}"
                log.warning("%s: attempt %d: %s", self.url, attempt + 1, problem)
        raise self._error(problem, self.retries + 1)

    def _error(self, problem: str, attempts: int) -> ModelEndpointError:
        return ModelEndpointError(
            f"language-model endpoint {self.url} (model {self.model!r}) failed after "
            f"{attempts} attempt(s): {problem}; nothing was written"
        )


def _content(raw: str) -> Any:
    """The JSON object in a chat completion's first choice (SchemaViolationError otherwise)."""
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise SchemaViolationError(
            "not a chat completion (no choices[0].message.content)"
        ) from None
    if not isinstance(content, str):
        raise SchemaViolationError("choices[0].message.content is not a string")
    fenced = _FENCE.match(content)
    try:
        return json.loads(fenced.group(1) if fenced else content)
    except ValueError:
        raise SchemaViolationError(f"the content is not JSON: {content[:120]!r}") from None

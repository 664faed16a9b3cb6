"""Text analysis for the lexical relay: text → list of index terms.

The pipeline, applied to each text, is

1. Unicode normalisation (``NFKC`` by default: full-width and ligature forms fold to ASCII);
2. lower-casing;
3. tokenisation on runs of word characters (``\\w``: letters, digits, underscore), keeping
   internal apostrophes (``o'neil``, ``don't``); typographic apostrophes (’ ʼ) count as ``'``;
4. per token: the English possessive ``'s`` is dropped (``Caroline's`` → ``caroline``), tokens
   shorter than ``min_token_len`` (or longer than ``max_token_len``) characters are dropped,
   optional accent stripping, stop words are dropped, and the survivor is stemmed with the
   Snowball English stemmer (``PyStemmer``).

Step 4 depends only on the token and the settings, so it is memoised once per process for
every analyzer with the same settings (:attr:`Analyzer.name`): after warm-up a token costs one
dict lookup, and the hundredth store an evaluation opens reuses what the first one stemmed.
The analyzer's :attr:`Analyzer.name` and :attr:`Analyzer.config` describe every setting that
changes its output; an index stores them so that reopening it with a different analyzer is
detected instead of silently returning poor matches.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from spector_gpu.errors import ConfigError, ValidationError

from .stopwords import ENGLISH_STOPWORDS

__all__ = ["ANALYZER_VERSION", "ENGLISH_STOPWORDS", "Analyzer"]

#: Bumped whenever a change to this module changes the terms produced for some text.
ANALYZER_VERSION = 1


_TOKEN_RE = re.compile(r"\w+(?:['\u2019\u02bc]\w+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})
_NORMAL_FORMS = ("NFKC", "NFC")
_DEFAULT_CACHE = 1 << 20  # memoised distinct tokens before the memo is cleared


def _stop_fingerprint(words: frozenset[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(words)).encode("utf-8")).hexdigest()
    return digest[:12]


class _TermMemo(dict[str, str]):
    """raw token → index term ("" for a dropped token); misses are resolved and remembered."""

    def __init__(self, resolve: Callable[[str], str], limit: int) -> None:
        super().__init__()
        self._resolve = resolve
        self._limit = limit

    def __missing__(self, raw: str) -> str:
        term = self._resolve(raw)
        if len(self) >= self._limit:
            self.clear()  # bound memory on unbounded vocabularies; refills on demand
        self[raw] = term
        return term


_MEMOS: dict[tuple[str, int], _TermMemo] = {}
_MEMOS_LOCK = threading.Lock()


def _shared_memo(name: str, limit: int, resolve: Callable[[str], str]) -> _TermMemo:
    """The process-wide memo of analyzers named ``name``: equal names produce equal terms for
    every token, so one memo serves them all (an evaluation's 200 stores stem each distinct
    token once, not 200 times). Bounded like a private memo (``limit`` tokens, then cleared)."""
    key = (name, limit)
    with _MEMOS_LOCK:
        memo = _MEMOS.get(key)
        if memo is None:
            memo = _MEMOS[key] = _TermMemo(resolve, limit)
        return memo


class Analyzer:
    """Turns text into BM25 index terms; deterministic and dependency-light.

    Args:
        lowercase: lower-case the text (``str.lower``) before tokenising.
        normalize: Unicode normal form applied first (``"NFKC"``, ``"NFC"``) or ``None``.
            Decomposed forms are not offered: ``\\w`` does not match combining marks.
        stopwords: ``True`` for :data:`ENGLISH_STOPWORDS`, ``False`` for none, or a custom set
            (compared against the lower-cased token).
        stemming: ``"english"`` (Snowball, via PyStemmer) or ``None``.
        min_token_len: drop tokens shorter than this many characters (before stemming).
        max_token_len: drop tokens longer than this many characters, or ``None`` for no limit.
        strip_accents: fold accents (``café`` → ``cafe``) per token.
        cache_size: distinct tokens memoised before the memo is cleared (bounds memory); the
            memo is shared by every analyzer of the process with the same settings.

    Raises:
        ConfigError: a setting is out of range or of the wrong type.
    """

    def __init__(
        self,
        *,
        lowercase: bool = True,
        normalize: Literal["NFKC", "NFC"] | None = "NFKC",
        stopwords: bool | frozenset[str] = True,
        stemming: Literal["english"] | None = "english",
        min_token_len: int = 1,
        max_token_len: int | None = None,
        strip_accents: bool = False,
        cache_size: int = _DEFAULT_CACHE,
    ) -> None:
        if normalize is not None and normalize not in _NORMAL_FORMS:
            raise ConfigError(f"analyzer normalize={normalize!r}: use 'NFKC', 'NFC' or None")
        if stemming is not None and stemming != "english":
            raise ConfigError(f"analyzer stemming={stemming!r}: use 'english' or None")
        if isinstance(stopwords, bool):
            stop = ENGLISH_STOPWORDS if stopwords else frozenset()
        elif isinstance(stopwords, (set, frozenset)) and all(isinstance(w, str) for w in stopwords):
            stop = frozenset(w.lower() for w in stopwords)
        else:
            raise ConfigError("analyzer stopwords: pass True, False or a frozenset of strings")
        if (
            isinstance(min_token_len, bool)
            or not isinstance(min_token_len, int)
            or min_token_len < 1
        ):
            raise ConfigError(f"analyzer min_token_len={min_token_len!r}: use an int >= 1")
        if max_token_len is not None and (
            isinstance(max_token_len, bool)
            or not isinstance(max_token_len, int)
            or max_token_len < min_token_len
        ):
            raise ConfigError(
                f"analyzer max_token_len={max_token_len!r}: use None or an int >= min_token_len"
            )
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise ConfigError(f"analyzer cache_size={cache_size!r}: use an int >= 1")
        self._lowercase = bool(lowercase)
        self._normalize = normalize
        self._stop = stop
        self._stop_kind = (
            "english" if stop == ENGLISH_STOPWORDS else ("none" if not stop else "custom")
        )
        self._stemming = stemming
        self._min_len = min_token_len
        self._max_len = max_token_len
        self._strip_accents = bool(strip_accents)
        self._cache_size = cache_size
        self._stem: Callable[[str], str] | None = None
        if stemming is not None:
            import Stemmer  # PyStemmer: a core dependency; imported on first construction

            self._stem = Stemmer.Stemmer(stemming).stemWord
        self._memo = _shared_memo(self.name, cache_size, self._resolve)

    # ------------------------------------------------------------------ description
    @property
    def config(self) -> dict[str, Any]:
        """Every setting that changes the output, JSON-serialisable; see :meth:`from_config`."""
        return {
            "analyzer": "spector_gpu.cortex.analyzer",
            "version": ANALYZER_VERSION,
            "lowercase": self._lowercase,
            "normalize": self._normalize,
            "stopwords": self._stop_kind,
            "stopwords_sha": _stop_fingerprint(self._stop),
            "custom_stopwords": sorted(self._stop) if self._stop_kind == "custom" else [],
            "stemming": self._stemming,
            "min_token_len": self._min_len,
            "max_token_len": self._max_len,
            "strip_accents": self._strip_accents,
        }

    @property
    def name(self) -> str:
        """Short stable description of the analyzer's settings.

        For example ``analyzer-v1(lower,NFKC,stop=english:…,stem=english,min=1)``. Two
        analyzers produce the same terms for every text if (and only if, up to changes of the
        stemmer library) their names are equal; store it beside an index.
        """
        parts = [
            "lower" if self._lowercase else "case",
            self._normalize or "raw",
            f"stop={self._stop_kind}:{_stop_fingerprint(self._stop)}",
            f"stem={self._stemming or 'none'}",
            f"min={self._min_len}",
        ]
        if self._max_len is not None:
            parts.append(f"max={self._max_len}")
        if self._strip_accents:
            parts.append("noaccents")
        return f"analyzer-v{ANALYZER_VERSION}({','.join(parts)})"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Analyzer:
        """Rebuild the analyzer described by :attr:`config` (e.g. read back beside an index).

        Raises:
            ConfigError: the config is malformed or was written by another analyzer version.
        """
        try:
            if config.get("version") != ANALYZER_VERSION:
                raise ConfigError(
                    f"analyzer config version {config.get('version')!r} is not "
                    f"{ANALYZER_VERSION}; re-index the texts with the current analyzer"
                )
            kind = config["stopwords"]
            stop: bool | frozenset[str]
            if kind == "custom":
                stop = frozenset(config["custom_stopwords"])
            elif kind in ("english", "none"):
                stop = kind == "english"
            else:
                raise ConfigError(f"analyzer config stopwords={kind!r} is unknown")
            made = cls(
                lowercase=bool(config["lowercase"]),
                normalize=config["normalize"],
                stopwords=stop,
                stemming=config["stemming"],
                min_token_len=config["min_token_len"],
                max_token_len=config["max_token_len"],
                strip_accents=bool(config["strip_accents"]),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(
                f"analyzer config is malformed ({exc!r}); expected Analyzer.config"
            ) from exc
        if made.config["stopwords_sha"] != config.get("stopwords_sha"):
            raise ConfigError(
                "analyzer config stopwords_sha does not match its stop list; the built-in list "
                "changed since the index was written: re-index or pass the old list explicitly"
            )
        return made

    def __repr__(self) -> str:
        return f"Analyzer<{self.name}>"

    def __reduce__(self) -> tuple[Callable[..., Analyzer], tuple[str]]:
        # For process pools / Ray workers only (nothing is ever pickled to disk): ship the
        # config, not the stemmer handle or the memo.
        return _analyzer_from_json, (json.dumps(self.config),)

    # ------------------------------------------------------------------ analysis
    def _resolve(self, raw: str) -> str:
        token = raw.translate(_APOSTROPHES)
        if token.endswith(("'s", "'S")):
            token = token[:-2]
        if self._strip_accents and not token.isascii():
            decomposed = unicodedata.normalize("NFD", token)
            token = unicodedata.normalize(
                "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
            )
        if len(token) < self._min_len or (self._max_len is not None and len(token) > self._max_len):
            return ""
        if token.lower() in self._stop:
            return ""
        return self._stem(token) if self._stem is not None else token

    def tokens(self, text: str) -> list[str]:
        """Index terms of one text, in order of occurrence (repeats kept: they are term counts).

        Raises:
            ValidationError: ``text`` is not a ``str``.
        """
        if not isinstance(text, str):
            raise ValidationError(f"text must be a str, got {type(text).__name__}")
        if self._normalize is not None:
            text = unicodedata.normalize(self._normalize, text)
        if self._lowercase:
            text = text.lower()
        lookup = self._memo.__getitem__
        return [t for t in map(lookup, _TOKEN_RE.findall(text)) if t]

    def tokens_batch(self, texts: Sequence[str]) -> list[list[str]]:
        """Index terms of each text: ``result[i] == tokens(texts[i])``.

        Raises:
            ValidationError: ``texts`` is a bare string or an element is not a ``str``.
        """
        if isinstance(texts, (str, bytes)):
            raise ValidationError("texts must be a sequence of str, not a single string")
        norm = self._normalize
        lower = self._lowercase
        normalize = unicodedata.normalize
        findall = _TOKEN_RE.findall
        lookup = self._memo.__getitem__
        out: list[list[str]] = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValidationError(f"texts[{i}] must be a str, got {type(text).__name__}")
            if norm is not None:
                text = normalize(norm, text)
            if lower:
                text = text.lower()
            out.append([t for t in map(lookup, findall(text)) if t])
        return out


def _analyzer_from_json(blob: str) -> Analyzer:
    return Analyzer.from_config(cast(dict[str, Any], json.loads(blob)))

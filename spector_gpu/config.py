"""Configuration: frozen dataclasses with defaults in one place.

Precedence: arguments > ``SPECTOR_SECTION__KEY`` environment variables > a TOML file > the
defaults below (which ``configs/default.toml`` mirrors). The effective configuration is saved
in the store directory as ``config.json``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .config_rules import CHOICES, DEPRECATED, MAXIMUM, POSITIVE, RETIRED
from .errors import ConfigError

log = logging.getLogger(__name__)

__all__ = [
    "AssociationConfig",
    "Config",
    "DenseConfig",
    "DreamConfig",
    "EmbedderConfig",
    "LLMConfig",
    "LexicalConfig",
    "RecallConfig",
    "ReflectConfig",
    "SleepConfig",
    "StoreConfig",
    "StrengthConfig",
    "WorkingConfig",
    "load_config",
]


@dataclass(frozen=True)
class StoreConfig:
    durability: str = "flush"  # none | flush | fsync
    strict: bool = False  # refuse to open on any corruption found at open (else point-in-time)
    provenance_capacity: int = 8192  # provenance records
    max_text_bytes: int = 1 << 20  # per memory (UTF-8)
    max_batch: int = 100_000  # items per remember_batch call
    checkpoint_mb: int = (
        16  # journal size that triggers a checkpoint (the journal is reused after it)
    )
    snapshot_every: int = 50_000  # new memories between automatic index snapshots
    compact_dead_share: float = 0.25  # share of dead rows (0..1] past which a store compacts


@dataclass(frozen=True)
class EmbedderConfig:
    name: str = "static"  # static | hashing | hashing:DIM | minilm | st:/local/path
    batch_size: int = 256
    context_turns: int = 1  # an episode is embedded with this many previous same-session turns


@dataclass(frozen=True)
class DenseConfig:
    backend: str = "torch"  # torch | faiss
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    ivf_min_rows: int = 0  # rows from which the CPU dense relay's first pass is an IVF (0: never)
    ivf_nprobe: int = 32  # IVF lists scanned per query
    ivf_lists: int = 0  # IVF lists (0: sqrt(rows))


@dataclass(frozen=True)
class LexicalConfig:
    method: str = "lucene"  # lucene | okapi
    k1: float = 1.2
    b: float = 0.75
    stopwords: bool = True
    stemming: bool = True


@dataclass(frozen=True)
class AssociationConfig:
    temporal_window: int = 2  # same-session neighbours on each side
    temporal_weight: float = 1.0
    tag_weight: float = 0.0  # edge weight between consecutive memories sharing a tag
    lineage_weight: float = 1.0
    hops: int = 1
    decay: float = 0.5  # per-hop activation decay


@dataclass(frozen=True)
class RecallConfig:
    k: int = 10
    fusion: str = "cognitive"  # cognitive | weighted | rrf
    lexical_weight: float = 1.0
    dense_weight: float = 1.0  # multiplied by the embedder's fusion_weight (hashing 0.3)
    association_weight: float = 0.6
    salience_weight: float = 0.05
    rrf_k: int = 60
    candidates: int = 200  # per relay, before fusion
    cognitive_beta: float = 0.1
    tag_tau: float = 0.3
    time_cue_weight: float = 1.5  # lift of members formed when the query says (time_cues)
    token_weight: float = 1.0  # the token relay's re-scoring of the fused top list
    session_weight: float = 0.5  # the session relay's lift (x the embedder's fusion_weight)
    token_depth: int = 100  # fused results the token relay re-scores
    helper_threads: int = 1  # threads beside the caller sharing a large batch's kernels
    # caps of one recall_batch call (ValidationError naming the key when exceeded)
    max_queries: int = 10_000  # queries per call
    max_k: int = 10_000  # results per query
    max_results: int = 1_000_000  # k x queries per call
    max_query_chars: int = 100_000  # characters per query
    # caps of one metadata filter (`where`) of a recall, list, count or delete_all
    max_filter_values: int = 10_000  # values of one $in / $nin list
    max_filter_depth: int = 32  # nested $and / $or / $not levels
    max_filter_terms: int = 100_000  # conditions and listed values in one filter


@dataclass(frozen=True)
class StrengthConfig:
    decay_exponent: float = 0.15
    decay_floor: float = 0.10
    decay_unit_s: float = 3600.0  # time unit of the power law
    ltp_cooldown_s: float = 300.0  # S += ltp_step at most once per cooldown on recall
    ltp_step: float = 0.05
    max_storage: float = 5.0
    forget_factor: float = 0.5  # forget() multiplies D by this


@dataclass(frozen=True)
class WorkingConfig:
    capacity: int = 100  # thoughts held in volatile working memory (oldest evicted first)


@dataclass(frozen=True)
class ReflectConfig:
    max_facts_per_session: int = 32
    max_facts_per_turn: float = 0.35  # the default distiller's facts per turn of a pass, at most
    thread_window: int = 2  # turns: a speaker's statements this close on one topic are one fact
    distiller: str = "extractive"  # "extractive" (offline rules) or "llm" (the [llm] endpoint)
    reconcile: bool = True  # a new fact supersedes the known fact it updates or contradicts
    min_sentence_chars: int = 12
    max_turns_per_pass: int = 256  # a longer session is consolidated in passes of this many


@dataclass(frozen=True)
class DreamConfig:
    hebbian: bool = False  # dreams change association weights (off: dream_ablation.md)
    hebbian_rate: float = 0.1  # weight gained by a co-activated pair per dream (at most)
    hebbian_max: float = 0.5  # cap of a Hebbian link's weight
    noise_decay: float = 0.2  # fraction of its Hebbian weight a passed-over pair loses
    fragments: int = 3  # memories replayed after the seed in one dream
    simulated: bool = True  # write a recombination of the fragments as a SIMULATED memory
    recent_ms: int = 86_400_000  # a memory recalled within this window is a likelier seed


@dataclass(frozen=True)
class LLMConfig:
    """An OpenAI-compatible chat endpoint for the language-model distiller and reconciliation
    (``spector-gpu[llm]``); unset (empty ``base_url`` or ``model``) means none is configured.
    The key is never stored: it is read from the environment variable named here."""

    base_url: str = ""  # e.g. https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama)
    model: str = ""  # e.g. gpt-4o-mini, llama3.1
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key (may be unset)
    timeout_s: float = 60.0  # seconds per request
    retries: int = 2  # further attempts after a failed or malformed answer
    max_facts: int = 32  # facts asked of the model per pass, at most


@dataclass(frozen=True)
class SleepConfig:
    prune: bool = False  # mark memories whose D fell below prune_below for compaction
    prune_below: float = 0.12  # retrieval strength D under which a memory may be pruned
    dream: bool = False  # run a dream phase in every sleep cycle
    max_dreams: int = 5  # dreams of one sleep cycle's dream phase


@dataclass(frozen=True)
class Config:
    store: StoreConfig = field(default_factory=StoreConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    dense: DenseConfig = field(default_factory=DenseConfig)
    lexical: LexicalConfig = field(default_factory=LexicalConfig)
    association: AssociationConfig = field(default_factory=AssociationConfig)
    recall: RecallConfig = field(default_factory=RecallConfig)
    strength: StrengthConfig = field(default_factory=StrengthConfig)
    reflect: ReflectConfig = field(default_factory=ReflectConfig)
    working: WorkingConfig = field(default_factory=WorkingConfig)
    dream: DreamConfig = field(default_factory=DreamConfig)
    sleep: SleepConfig = field(default_factory=SleepConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def replace(self, overrides: Mapping[str, Mapping[str, Any]]) -> Config:
        """A copy with ``{section: {key: value}}`` applied (validated)."""
        return _apply(self, overrides, origin="arguments")

    @staticmethod
    def saved(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The effective config a store saved (``config.json``), or None."""
        from .storage.io import read_regular

        p = Path(directory) / "config.json"
        try:
            # never through a link, never a FIFO, never a file far larger than a config
            text = read_regular(p, max_bytes=1 << 20).decode("utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: saved config is not valid JSON") from None
        except OSError as exc:  # e.g. permission denied: a library error naming the file
            from .storage.partition import open_failure

            raise open_failure(Path(directory), exc, writable=False) from exc
        try:
            data = json.loads(text)
        except ValueError:
            raise ConfigError(f"{p}: saved config is not valid JSON") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: saved config is not a table")
        return data

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``config.json`` (atomically; synced to disk, file and directory, under
        ``durability = "fsync"``, the level that promises to survive power loss); an I/O
        error is the library error a store open would give."""
        from .storage.io import atomic_write
        from .storage.partition import open_failure

        data = json.dumps(self.to_dict(), indent=2, sort_keys=True).encode()
        try:
            durable = self.store.durability == "fsync"
            atomic_write(Path(directory) / "config.json", data, durable=durable)
        except OSError as exc:
            raise open_failure(Path(directory), exc, writable=True) from exc


_SECTIONS = {f.name: f.type for f in fields(Config)}
_SAVED = "saved store config"


def _section_class(name: str) -> type:
    return {
        "store": StoreConfig,
        "embedder": EmbedderConfig,
        "dense": DenseConfig,
        "lexical": LexicalConfig,
        "association": AssociationConfig,
        "recall": RecallConfig,
        "strength": StrengthConfig,
        "reflect": ReflectConfig,
        "working": WorkingConfig,
        "dream": DreamConfig,
        "sleep": SleepConfig,
        "llm": LLMConfig,
    }[name]


def _coerce(value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in (
            "1",
            "true",
            "yes",
            "on",
            "0",
            "false",
            "no",
            "off",
        ):
            return value.lower() in ("1", "true", "yes", "on")
        raise ConfigError(f"{where} must be a boolean, got {value!r}")
    if isinstance(default, (int, float)) and isinstance(value, bool):  # bool is an int subclass
        raise ConfigError(f"{where} must be a number, got the boolean {value!r}")
    if isinstance(default, int):
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be an integer, got {value!r}") from None
    if isinstance(default, float):
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be a number, got {value!r}") from None
        if not math.isfinite(out):
            raise ConfigError(f"{where} must be finite, got {value!r}")
        return out
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


def _apply(config: Config, overrides: Mapping[str, Mapping[str, Any]], *, origin: str) -> Config:
    sections = {}
    for section, values in overrides.items():
        if section not in _SECTIONS:
            raise ConfigError(
                f"{origin}: unknown config section [{section}]; known: {sorted(_SECTIONS)}"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(f"{origin}: section [{section}] must be a table")
        current = getattr(config, section)
        changes = {}
        names = {f.name for f in fields(current)}
        for key, value in values.items():
            if (section, key) in RETIRED:
                log.info(
                    "%s: %s.%s is retired and ignored: %s",
                    origin,
                    section,
                    key,
                    RETIRED[(section, key)],
                )
                continue
            if (section, key) in DEPRECATED:
                # a store's saved config.json carries every key it had: only the user is told
                if origin != _SAVED:
                    warnings.warn(
                        f"{origin}: {section}.{key} is deprecated and ignored: "
                        f"{DEPRECATED[(section, key)]}",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                continue
            if key not in names:
                raise ConfigError(
                    f"{origin}: unknown setting {section}.{key}; known: {sorted(names)}"
                )
            where = f"{origin}: {section}.{key}"
            v = _coerce(value, getattr(current, key), where)
            choices = CHOICES.get((section, key))
            if choices and v not in choices:
                raise ConfigError(f"{where} must be one of {choices}, got {v!r}")
            if (section, key) in POSITIVE and v <= 0:
                raise ConfigError(f"{where} must be > 0, got {v!r}")
            top = MAXIMUM.get((section, key))
            if top is not None and v > top:
                raise ConfigError(f"{where} must be <= {top}, got {v!r}")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                raise ConfigError(f"{where} must be >= 0, got {v!r}")
            changes[key] = v
        sections[section] = dataclasses.replace(current, **changes)
    return dataclasses.replace(config, **sections)


def _env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        if not name.startswith("SPECTOR_") or "__" not in name:
            continue
        section, _, key = name[len("SPECTOR_") :].partition("__")
        out.setdefault(section.lower(), {})[key.lower()] = value
    return out


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
    base: Mapping[str, Mapping[str, Any]] | None = None,
) -> Config:
    """Defaults (or ``base``, e.g. a store's saved config), then the TOML file at ``path``,
    then environment, then ``overrides``."""
    config = Config()
    if base:
        config = _apply(config, base, origin=_SAVED)
    if path is not None:
        p = Path(path)
        try:
            if not p.is_file():
                raise ConfigError(f"config file not found: {p}")
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p}: not valid TOML ({exc})") from None
        except (OSError, ValueError) as exc:  # a name too long, a NUL byte, no permission
            raise ConfigError(f"cannot read config file {str(p)[:200]!r}: {exc}") from None
        config = _apply(config, data, origin=str(p))
    env = _env_overrides(os.environ if environ is None else environ)
    if env:
        config = _apply(config, env, origin="environment")
    if overrides:
        config = _apply(config, overrides, origin="arguments")
    return config

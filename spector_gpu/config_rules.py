"""The value rules of configuration keys: allowed choices, keys that must be positive, upper
bounds of keys that size a per-recall loop, deprecated keys (ignored with a DeprecationWarning)
and retired keys (read with a note, never an error).
``config.py`` applies them to every override (TOML, environment, arguments, a saved store)."""

from __future__ import annotations

from .metadata.filter_limits import CEILING

__all__ = ["CHOICES", "DEPRECATED", "MAXIMUM", "POSITIVE", "RETIRED"]

CHOICES = {
    ("store", "durability"): ("none", "flush", "fsync"),
    ("dense", "backend"): ("torch", "faiss"),
    ("lexical", "method"): ("lucene", "okapi"),
    ("recall", "fusion"): ("cognitive", "weighted", "rrf"),
    ("reflect", "distiller"): ("extractive", "llm"),
}
POSITIVE = {
    ("store", "provenance_capacity"),
    ("store", "max_text_bytes"),
    ("store", "max_batch"),
    ("store", "checkpoint_mb"),
    ("recall", "k"),
    ("dense", "ivf_nprobe"),
    ("recall", "candidates"),
    ("recall", "token_depth"),
    ("recall", "rrf_k"),
    ("recall", "max_queries"),
    ("recall", "max_k"),
    ("recall", "max_results"),
    ("recall", "max_query_chars"),
    ("recall", "max_filter_values"),
    ("recall", "max_filter_depth"),
    ("recall", "max_filter_terms"),
    ("embedder", "batch_size"),
    ("store", "snapshot_every"),
    ("store", "compact_dead_share"),
    ("reflect", "max_facts_per_session"),
    ("reflect", "max_turns_per_pass"),
    ("llm", "timeout_s"),
    ("llm", "max_facts"),
    ("strength", "decay_unit_s"),
    ("working", "capacity"),
    ("dream", "fragments"),
    ("sleep", "max_dreams"),
}
# Settings that size a loop per recall: a hostile or mistyped config.json must not hang a reader.
MAXIMUM = {
    ("association", "hops"): 16,
    ("association", "temporal_window"): 1024,
    # fusion coefficients: larger ones only overflow the MF-001 factor
    ("recall", "cognitive_beta"): 1e6,
    ("recall", "tag_tau"): 1e6,
    ("recall", "time_cue_weight"): 1e6,
    ("recall", "token_weight"): 1e6,
    ("recall", "session_weight"): 1e6,
    ("recall", "token_depth"): 10_000,
    ("recall", "helper_threads"): 64,
    # filter caps: a RecallOptions is compiled against these before any store sees it
    ("recall", "max_filter_values"): CEILING.values,
    ("recall", "max_filter_depth"): CEILING.depth,
    ("recall", "max_filter_terms"): CEILING.terms,
    # association edge weights and decay multiply activations once per hop
    ("association", "temporal_weight"): 1e6,
    ("association", "tag_weight"): 1e6,
    ("association", "lineage_weight"): 1e6,
    ("association", "decay"): 1e6,
    # factors and fractions: above 1 they would turn forgetting into strengthening
    ("strength", "forget_factor"): 1.0,
    ("strength", "decay_floor"): 1.0,
    ("lexical", "b"): 1.0,
    ("store", "compact_dead_share"): 1.0,  # 1.0: never compact automatically
    ("reflect", "max_facts_per_turn"): 1.0,  # a fraction of a pass's turns
    ("reflect", "thread_window"): 1024,
    ("llm", "retries"): 10,
    ("llm", "max_facts"): 255,  # a batch of facts
    ("working", "capacity"): 1_000_000,
    # a dream replays `fragments` memories; a Hebbian weight is a link weight (<= 1 like D)
    ("dream", "fragments"): 64,
    ("dream", "hebbian_rate"): 1.0,
    ("dream", "hebbian_max"): 1.0,
    ("dream", "noise_decay"): 1.0,
    ("sleep", "prune_below"): 1.0,
    ("sleep", "max_dreams"): 10_000,
}
# Settings that existed once and mean nothing now: a saved config.json (or a user's TOML) that
# still names them opens with a logged note instead of an error.
# keys a user may still set, with a DeprecationWarning saying what to do (a saved store's
# config.json, which lists every key, is read without one)
DEPRECATED = {
    ("dense", "scan_threads"): "the dense scan runs on the calling thread (its helper thread "
    "was removed: no measured win); delete the setting",
}
RETIRED = {
    ("store", "events"): "the hash-chained event log is always kept (provenance needs it)",
    ("association", "seeds"): "spreading activation starts from every pool member",
}

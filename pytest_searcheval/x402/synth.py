"""A deterministic synthetic native collection, for benchmarks and tests.

The documents are x402-shaped listings with valid strkeys, so the full validation path runs.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from pytest_searcheval.x402 import strkey

__all__ = ["ASSETS", "write_synthetic"]

_WORDS = [
    "weather",
    "forecast",
    "price",
    "oracle",
    "swap",
    "token",
    "image",
    "caption",
    "translate",
    "speech",
    "audio",
    "search",
    "news",
    "stock",
    "quote",
    "sentiment",
    "embedding",
    "vector",
    "chart",
    "map",
    "route",
    "geocode",
    "invoice",
    "email",
    "sms",
    "compliance",
    "kyc",
    "identity",
    "ledger",
    "payment",
    "stream",
    "video",
    "thumbnail",
    "pdf",
    "extract",
    "ocr",
    "summary",
]


def _key(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


ASSETS: list[dict[str, str | int]] = [
    {
        "code": "USDC",
        "network": "stellar:pubnet",
        "address": strkey.encode_contract(_key("usdc-p")),
        "decimals": 7,
        "usd": "1.00",
    },
    {
        "code": "USDC",
        "network": "stellar:testnet",
        "address": strkey.encode_contract(_key("usdc-t")),
        "decimals": 7,
        "usd": "1.00",
    },
    {
        "code": "EURC",
        "network": "stellar:pubnet",
        "address": strkey.encode_contract(_key("eurc-p")),
        "decimals": 7,
        "usd": "1.08",
    },
    {
        "code": "WETH",
        "network": "stellar:pubnet",
        "address": strkey.encode_contract(_key("weth-p")),
        "decimals": 18,
        "usd": "3000",
    },
]


def _manifest_yaml() -> str:
    lines = [
        "name: synthetic",
        "version: 1",
        "grades: [0, 1, 2, 3]",
        "splits: [dev, test]",
        "classes: [exact-name, paraphrase, filtered, no-result, adversarial, mcp, typo]",
        'price_snapshot: "2026-11-01"',
        "assets:",
    ]
    for a in ASSETS:
        lines.append(
            f"  - {{code: {a['code']}, network: {a['network']}, address: {a['address']}, "
            f'decimals: {a["decimals"]}, usd: "{a["usd"]}"}}'
        )
    return "\n".join(lines) + "\n"


def write_synthetic(
    root: str | Path,
    n_docs: int = 1000,
    n_queries: int = 50,
    judged_per_query: int = 20,
    *,
    seed: int = 7,
    files: int = 4,
) -> Path:
    """Write a valid native collection of ``n_docs`` listings and ``n_queries`` queries."""
    rng = random.Random(seed)
    root = Path(root)
    (root / "corpus").mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "collection.yaml").write_text(_manifest_yaml(), encoding="utf-8")
    accounts = [strkey.encode_account(_key(f"acct{i}")) for i in range(50)]
    handles = [
        (root / "corpus" / f"part-{i:02d}.jsonl").open("w", encoding="utf-8") for i in range(files)
    ]
    try:
        for i in range(n_docs):
            words = rng.choices(_WORDS, k=30)
            asset = ASSETS[i % len(ASSETS)]
            pay_to = accounts[i % len(accounts)]
            if i % 7 == 0:
                pay_to = strkey.encode_muxed(strkey.decode(pay_to).key, i)
            rec = {
                "id": f"doc-{i:06d}",
                "title": " ".join(words[:4]).title(),
                "text": " ".join(words),
                "fields": {"provider": f"Provider {i % 97}", "tags": words[:3]},
                "x402": {
                    "resource": f"https://api{i % 97}.example/v1/{words[0]}/{i}",
                    "type": "mcp" if i % 10 == 0 else "http",
                    "description": " ".join(words),
                    "mimeType": "application/json",
                    "accepts": [
                        {
                            "scheme": "exact",
                            "network": asset["network"],
                            "asset": asset["address"],
                            "amount": str(
                                rng.randint(1, 10**6) * 10 ** (int(str(asset["decimals"])) - 6)
                            ),
                            "payTo": pay_to,
                            "maxTimeoutSeconds": 60,
                            "extra": {},
                        }
                    ],
                },
                "sidecar": {"category": words[0], "liveness": "live", "settlements": i % 5000},
            }
            handles[i % files].write(json.dumps(rec) + "\n")
    finally:
        for h in handles:
            h.close()
    classes = ["exact-name", "paraphrase", "filtered", "adversarial", "mcp"]
    with (
        (root / "qrels" / "queries.yaml").open("w", encoding="utf-8") as q,
        (root / "qrels" / "judgments.tsv").open("w", encoding="utf-8") as j,
    ):
        j.write("query_id\tdoc_id\tgrade\n")
        for k in range(n_queries):
            qid = f"q{k:05d}"
            text = " ".join(rng.choices(_WORDS, k=3))
            q.write(
                f'- id: {qid}\n  text: "{text}"\n  class: {classes[k % len(classes)]}\n'
                f"  split: {'dev' if k % 2 else 'test'}\n  source: null\n  group: null\n"
                "  constraints: {}\n  expect: {}\n"
            )
            for d in rng.sample(range(n_docs), min(judged_per_query, n_docs)):
                j.write(f"{qid}\tdoc-{d:06d}\t{rng.randint(0, 3)}\n")
    return root

"""Regenerate the computed `providers:` section at the end of construction/taxonomy.yaml.

The hand-written part of the taxonomy (categories, capabilities, absent) is the source; this script
derives, per provider, its products and whether it offers several sibling endpoints, and per MCP
server its tools. Run: python construction/taxonomy_summary.py
"""

from __future__ import annotations

from pathlib import Path

import yaml
from build_corpus import ASSETS, recipients

MARKER = "# ---- computed by construction/taxonomy_summary.py; do not edit below ----"


def main() -> None:
    path = Path(__file__).with_name("taxonomy.yaml")
    text = path.read_text(encoding="utf-8")
    head = text.split(MARKER)[0].rstrip() + "\n"
    tax = yaml.safe_load(head)
    providers: dict[str, list[tuple[str, str, str]]] = {}
    servers: dict[str, list[str]] = {}
    for cap in tax["capabilities"]:
        for p in cap["providers"]:
            for product in p["products"]:
                providers.setdefault(p["provider"], []).append((product, cap["id"], p["type"]))
                if p["type"] == "mcp":
                    servers.setdefault(p["server"], []).append(product)
    out: dict[str, object] = {
        "providers": [
            {
                "provider": name,
                "sibling_endpoints": len(items) > 1,
                "products": [{"name": n, "capability": c, "type": t} for n, c, t in items],
            }
            for name, items in sorted(providers.items())
        ],
        "mcp_servers": [
            {"server": s, "tools": tools, "multi_tool": len(tools) > 1}
            for s, tools in sorted(servers.items())
        ],
    }
    # Payment vocabulary for filtered queries: what the options of the catalog can carry.
    out["payment_vocabulary"] = {
        "networks": ["stellar:pubnet", "stellar:testnet"],
        "schemes": ["exact", "upto"],
        "assets": [
            {"code": a.code, "network": a.network, "decimals": a.decimals, "usd": str(a.usd)}
            for a in ASSETS
        ],
        "extensions": ["bazaar", "attestation", "rate-limit"],
        "price_range_usd": ["0.0001", "7.5"],
        "note": (
            "each provider is paid at its G account below, at a muxed M address on that account,"
            " or at a contract C address (providers paid at a G account use a separate G"
            " account on testnet);"
            " a G recipient filter also matches its muxed M addresses"
        ),
    }
    out["provider_accounts"] = {name: recipients(name)["G"] for name in sorted(providers)}
    body = yaml.safe_dump(out, sort_keys=False, allow_unicode=True, width=100)
    path.write_text(head + "\n" + MARKER + "\n" + body, encoding="utf-8")


if __name__ == "__main__":
    main()

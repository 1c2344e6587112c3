"""Load on the engine's HTTP service: N clients searching for T seconds.

Starts ``python -m pytest_searcheval.engine serve`` on 127.0.0.1 (its own process) on a
collection (default: the shipped one), waits until it is ready (indexed and warmed), then runs
``--clients`` concurrent clients (asyncio, one keep-alive connection each, in this process) for
``--seconds``. Each client sends ``GET /discovery/search`` with the collection's query texts in
turn (the hybrid profile by default), one request at a time. Prints and writes (``--out``) the
throughput, latency percentiles over every request, status counts and errors, with the machine
and the date. The server is stopped with SIGTERM at the end. Bounded in time and count; every
request goes to the loopback address.

    python benchmarks/load_engine.py [--clients 16] [--seconds 60] [--profile hybrid]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-q * len(sorted_values) // 100)))
    return sorted_values[rank - 1]


def _start_server(collection: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "pytest_searcheval.engine", "serve", "--collection", collection,
         "--host", "127.0.0.1", "--port", "0", "--no-admin"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    found: list[str] = []
    lines: list[str] = []

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line.rstrip())
            m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
            if m:
                found.append(m.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 600
    while not found:
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise SystemExit("the engine did not start:\n" + "\n".join(lines))
        time.sleep(0.1)
    return server, found[0]


async def _client(
    base: str,
    queries: list[str],
    start: int,
    stop_at: float,
    profile: str,
    out: list[tuple[float, int | str]],
) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=30.0) as client:
        i = start
        while time.perf_counter() < stop_at:
            q = queries[i % len(queries)]
            i += 1
            t0 = time.perf_counter()
            try:
                r = await client.get("/discovery/search", params={"query": q, "profile": profile})
                status: int | str = r.status_code
            except Exception as exc:  # counted as an error, the run goes on
                status = type(exc).__name__
            out.append((time.perf_counter() - t0, status))


async def _run(
    base: str, queries: list[str], clients: int, seconds: float, profile: str
) -> tuple[list[tuple[float, int | str]], float]:
    out: list[tuple[float, int | str]] = []
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(
        *(_client(base, queries, k * 7, stop_at, profile, out) for k in range(clients))
    )
    return out, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default=str(ROOT))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--profile", default="hybrid")
    parser.add_argument("--out", default=None, help="JSON file for the figures")
    args = parser.parse_args()
    if not (1 <= args.clients <= 256 and 0 < args.seconds <= 600):
        parser.error("--clients 1..256 and --seconds up to 600")

    sys.path.insert(0, str(ROOT))
    from pytest_searcheval.collection import load

    queries = [q.text for q in load(args.collection).queries.values()]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server, base = _start_server(args.collection, env)
    try:
        samples, wall = asyncio.run(_run(base, queries, args.clients, args.seconds, args.profile))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    statuses = Counter(str(s) for _, s in samples)
    ok = sorted(t * 1000.0 for t, s in samples if s == 200)
    every = sorted(t * 1000.0 for t, _ in samples)
    errors = sum(n for s, n in statuses.items() if s != "200")
    load_avg = os.getloadavg() if hasattr(os, "getloadavg") else None
    figures = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_end": load_avg,
        },
        "collection": args.collection,
        "queries": len(queries),
        "profile": args.profile,
        "clients": args.clients,
        "seconds": round(wall, 2),
        "requests": len(samples),
        "throughput_rps": round(len(samples) / wall, 1),
        "statuses": dict(statuses),
        "errors": errors,
        "latency_ms": {
            "p50": round(_percentile(every, 50), 1),
            "p95": round(_percentile(every, 95), 1),
            "p99": round(_percentile(every, 99), 1),
            "max": round(every[-1], 1) if every else None,
        },
        "latency_ms_200_only_p50": round(_percentile(ok, 50), 1),
        "server_exit_status": server.returncode,
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

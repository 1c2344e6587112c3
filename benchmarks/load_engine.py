"""Throughput of the engine's HTTP service: N concurrent clients, per profile, against a peer.

    python benchmarks/load_engine.py [--clients 16] [--seconds 20] [--rounds 2]
        [--profiles lexical,semantic,hybrid] [--baseline-tree PATH] [--out FILE]

Starts ``python -m pytest_searcheval.engine serve`` on 127.0.0.1 (its own process) on a
collection (default: the shipped one), waits until it is ready (indexed and warmed), then for
each phase runs ``--clients`` concurrent clients for ``--seconds``: each client holds one
keep-alive connection and sends one request at a time, ``GET /discovery/search`` with the
collection's query texts in turn (one phase per profile). The clients are plain asyncio
streams speaking HTTP/1.1 in this process (an HTTP library client would cost the shared CPU
more than some of the requests it measures).

Peers, measured in the same run:

- ``GET /healthz`` with the same clients (one ``SELECT 1`` through the same stack: the
  ceiling the HTTP layer leaves): each profile's searches/s is also given as a share of it;
- with ``--baseline-tree`` (another checkout of the project, e.g. ``git worktree add``), the
  same phases against a server run from that tree: rounds alternate baseline, this tree,
  baseline, ..., and each figure is given as this tree / baseline.

Per phase: requests/s, latency p50/p95/p99 over every request, status counts, and the CPU time
the server process and its PostgreSQL spent per request (from their CPU clocks, so the
machine's other load matters less). Figures are medians over the rounds. The server is stopped
with SIGTERM after each round. Every request goes to the loopback address.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-q * len(sorted_values) // 100)))
    return sorted_values[rank - 1]


class Server:
    """``serve`` started from ``tree`` (its code on PYTHONPATH) on ``collection``."""

    def __init__(self, tree: Path, collection: str, extra: list[str]) -> None:
        # One embedding cache for every tree: the same vectors, whatever each tree would encode.
        cache = os.environ.get("SEARCHEVAL_CACHE_DIR", str(ROOT / ".searcheval-cache"))
        env = {**os.environ, "PYTHONPATH": str(tree), "SEARCHEVAL_CACHE_DIR": cache}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_searcheval.engine", "serve", "--collection",
             collection, "--host", "127.0.0.1", "--port", "0", "--no-admin", *extra],
            env=env, cwd=str(tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        found: list[tuple[str, int]] = []
        self.lines: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                m = re.search(r"serving on http://(127\.0\.0\.1):(\d+)", line)
                if m:
                    found.append((m.group(1), int(m.group(2))))

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 900
        while not found:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit("the engine did not start:\n" + "\n".join(self.lines))
            time.sleep(0.1)
        self.host, self.port = found[0]
        self._postgres: list[Any] | None = None
        # "serving on" is printed just before uvicorn starts listening: wait for an answer.
        while True:
            try:
                if asyncio.run(_once(self.host, self.port, "/healthz")) == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit("the engine did not answer:\n" + "\n".join(self.lines))
            time.sleep(0.1)

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time of the server process, and of the PostgreSQL it started."""
        import psutil

        def cpu(proc: psutil.Process) -> float:
            try:
                t = proc.cpu_times()
            except psutil.Error:
                return 0.0
            return float(t.user + t.system)

        try:
            root = psutil.Process(self.proc.pid)
        except psutil.Error:
            return 0.0, 0.0
        return cpu(root), sum(cpu(p) for p in self.postgres())

    def postgres(self) -> list[Any]:
        """The embedded PostgreSQL of this server: the postmaster whose directory names the
        server process as its owner (engine/lifecycle.py), and its children."""
        import psutil

        if self._postgres is None:
            self._postgres = []
            tmp = Path(tempfile.gettempdir())
            for owner in tmp.glob("searcheval-pg-*/searcheval-owner.json"):
                try:
                    if json.loads(owner.read_text("utf-8")).get("pid") != self.proc.pid:
                        continue
                except (OSError, ValueError):
                    continue
                pgdata = str(owner.parent / "pgdata")
                for proc in psutil.process_iter(["cmdline"]):
                    if pgdata in (proc.info.get("cmdline") or []):
                        self._postgres = [proc]
        out = []
        for postmaster in self._postgres[:1]:
            try:
                out = [postmaster, *postmaster.children(recursive=True)]
            except psutil.Error:
                out = []
        return out

    def stop(self) -> int | None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return self.proc.returncode


async def _request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str) -> int:
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode("ascii"))
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def _once(host: str, port: int, target: str) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        return await _request(reader, writer, target)
    finally:
        writer.close()


async def _client(
    host: str,
    port: int,
    targets: list[str],
    start: int,
    stop_at: float,
    out: list[tuple[float, int | str]],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        i = start
        while time.perf_counter() < stop_at:
            target = targets[i % len(targets)]
            i += 1
            t0 = time.perf_counter()
            try:
                status: int | str = await _request(reader, writer, target)
            except Exception as exc:  # counted as an error; reconnect and go on
                status = type(exc).__name__
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
            out.append((time.perf_counter() - t0, status))
    finally:
        writer.close()


def phase(server: Server, targets: list[str], clients: int, seconds: float) -> dict[str, Any]:
    async def run() -> tuple[list[tuple[float, int | str]], float]:
        out: list[tuple[float, int | str]] = []
        started = time.perf_counter()
        stop_at = started + seconds
        await asyncio.gather(
            *(
                _client(server.host, server.port, targets, k * 7, stop_at, out)
                for k in range(clients)
            )
        )
        return out, time.perf_counter() - started

    py0, pg0 = server.cpu_seconds()
    samples, wall = asyncio.run(run())
    py1, pg1 = server.cpu_seconds()
    n = max(1, len(samples))
    every = sorted(t * 1000.0 for t, _ in samples)
    statuses = Counter(str(s) for _, s in samples)
    return {
        "requests": len(samples),
        "per_s": round(len(samples) / wall, 1),
        "p50_ms": round(_percentile(every, 50), 1),
        "p95_ms": round(_percentile(every, 95), 1),
        "p99_ms": round(_percentile(every, 99), 1),
        "server_cpu_ms_per_request": round(1000 * (py1 - py0 + pg1 - pg0) / n, 2),
        "python_cpu_ms_per_request": round(1000 * (py1 - py0) / n, 2),
        "postgres_cpu_ms_per_request": round(1000 * (pg1 - pg0) / n, 2),
        "statuses": dict(statuses),
    }


def _median_phase(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = (
        "per_s",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "server_cpu_ms_per_request",
        "python_cpu_ms_per_request",
        "postgres_cpu_ms_per_request",
    )
    out: dict[str, Any] = {k: round(statistics.median(r[k] for r in rounds), 2) for k in keys}
    statuses: Counter[str] = Counter()
    for r in rounds:
        statuses.update(r["statuses"])
    out["statuses"] = dict(statuses)
    out["requests"] = sum(r["requests"] for r in rounds)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default=str(ROOT))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0, help="per phase")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profiles", default="lexical,semantic,hybrid")
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--serve-arg", action="append", default=[], help="extra serve argument")
    parser.add_argument("--out", default=None, help="JSON file for the figures")
    args = parser.parse_args()
    if not (1 <= args.clients <= 256 and 0 < args.seconds <= 600 and 1 <= args.rounds <= 20):
        parser.error("--clients 1..256, --seconds up to 600, --rounds 1..20")

    sys.path.insert(0, str(ROOT))
    from pytest_searcheval.collection import load

    queries = [q.text for q in load(args.collection).queries.values()]
    profiles = [p for p in args.profiles.split(",") if p]
    trees: dict[str, Path] = {"this": ROOT}
    if args.baseline_tree is not None:
        trees = {"baseline": args.baseline_tree.resolve(), "this": ROOT}
    targets = {
        p: ["/discovery/search?" + urlencode({"query": q, "profile": p}, safe="") for q in queries]
        for p in profiles
    }
    targets["healthz"] = ["/healthz"]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {t: {} for t in trees}
    exits: dict[str, list[int | None]] = {t: [] for t in trees}
    for n in range(args.rounds):
        for tree_name, tree in trees.items():
            server = Server(tree, args.collection, args.serve_arg)
            try:
                for name in ["healthz", *profiles]:
                    figures = phase(server, targets[name], args.clients, args.seconds)
                    results[tree_name].setdefault(name, []).append(figures)
                    print(f"round {n + 1} {tree_name} {name}: {figures}", flush=True)
            finally:
                exits[tree_name].append(server.stop())

    summary: dict[str, Any] = {}
    for tree_name, phases in results.items():
        rows = {name: _median_phase(rounds) for name, rounds in phases.items()}
        for name in profiles:
            rows[name]["share_of_healthz_per_s"] = round(
                rows[name]["per_s"] / rows["healthz"]["per_s"], 3
            )
        summary[tree_name] = rows
    if "baseline" in summary:
        summary["this / baseline"] = {
            name: {
                k: round(summary["this"][name][k] / summary["baseline"][name][k], 2)
                for k in ("per_s", "p50_ms", "p95_ms", "p99_ms", "server_cpu_ms_per_request")
                if summary["baseline"][name][k]
            }
            for name in ["healthz", *profiles]
        }
    errors = sum(
        n
        for phases in results.values()
        for rounds in phases.values()
        for r in rounds
        for s, n in r["statuses"].items()
        if s != "200"
    )
    figures = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
        },
        "collection": args.collection,
        "queries": len(queries),
        "clients": args.clients,
        "seconds_per_phase": args.seconds,
        "rounds": args.rounds,
        "trees": {k: str(v) for k, v in trees.items()},
        "serve_args": args.serve_arg,
        "summary": summary,
        "errors": errors,
        "server_exit_status": exits,
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

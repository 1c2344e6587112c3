"""Command line for the reference engine.

``python -m pytest_searcheval.engine serve --collection PATH [--host H] [--port P] [--dsn DSN]
[--token T]`` starts the whole stack (PostgreSQL, isolated schema, index, HTTP) and serves until
interrupted; the schema is dropped on exit.

``python -m pytest_searcheval.engine run --collection PATH --profile P --out FILE [--split S]
[--limit N]`` searches every query of the collection (of one split) and writes a TREC run file
(``qid Q0 docid rank score tag``, tag = profile) that trec_eval reads. A query the engine
answers with no result (the no-result threshold) has no lines. Scores are the engine's when
they strictly decrease down the list; otherwise (ties after rounding) the run uses
``score = n - rank + 1`` so that trec_eval, which sorts by score, keeps the engine's order.

``python -m pytest_searcheval.engine extraction --collection PATH [--split S] [--show]`` scores
query constraint extraction against the queries' hand-labelled constraints, per field (found,
missed, wrong value, spurious), without starting a database.

``serve`` listens only once it can answer: the collection is indexed, the embedding model
loaded and every usable profile has answered one warm-up search.

Exit status: 0 on success, 2 on a usage or input error (bad collection, bad DSN), 1 otherwise;
128 + N after signal N (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and every other signal that
ends a process by default and can be caught, engine/lifecycle.py), once the schema is dropped
and the embedded server stopped and removed; the last line says "cleaned up" only when no
directory or postgres of the embedded server is left.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection
    from pytest_searcheval.engine.core import Engine
    from pytest_searcheval.engine.lifecycle import Stopped

TOKEN_ENV = "SEARCHEVAL_ADMIN_TOKEN"
PROFILES = ("lexical", "semantic", "hybrid", "hybrid_rerank")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_searcheval.engine",
        description="The pytest-searcheval reference search engine (PostgreSQL + pgvector).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--collection", required=True, help="collection directory")
        p.add_argument(
            "--dsn",
            default=None,
            help="PostgreSQL DSN (default: $SEARCHEVAL_DSN, else an embedded server)",
        )
        p.add_argument("--cache-dir", default=None, help="embedding cache directory")
        p.add_argument(
            "--reranker",
            default=None,
            help="cross-encoder directory for hybrid_rerank (default: $SEARCHEVAL_RERANKER)",
        )

    serve = sub.add_parser("serve", help="index the collection and serve it over HTTP")
    common(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8402)
    serve.add_argument(
        "--token",
        default=None,
        help=f"admin bearer token (default: ${TOKEN_ENV}, else a random one printed at start)",
    )
    serve.add_argument("--no-admin", action="store_true", help="disable the admin routes")
    serve.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="open connections at most; past it the oldest idle one is closed (default: the"
        " descriptor limit less a reserve)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a connection has to send a complete request head (default: 10)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=10.0,
        help="seconds from a request head to the end of its body (default: 10)",
    )

    run = sub.add_parser("run", help="write a TREC run file for the collection's queries")
    common(run)
    run.add_argument("--profile", required=True, choices=PROFILES)
    run.add_argument("--out", required=True, help="run file to write ('-' for stdout)")
    run.add_argument("--split", default="all", help="dev, test or all (default: all)")
    run.add_argument("--limit", type=int, default=1000, help="results per query (1..1000)")
    run.add_argument(
        "--no-extract", action="store_true", help="do not extract filters from the query text"
    )
    run.add_argument("--tag", default=None, help="run tag (default: the profile name)")
    rules = sub.add_parser(
        "rules",
        help="fit the no-result rules on the collection's dev split and write them as JSON "
        "(for $SEARCHEVAL_NO_RESULT_RULES)",
    )
    common(rules)
    rules.add_argument("--out", required=True, help="rules file to write ('-' for stdout)")
    ext = sub.add_parser(
        "extraction",
        help="score query constraint extraction against the labelled constraints (no database)",
    )
    ext.add_argument("--collection", required=True, help="collection directory")
    ext.add_argument("--split", default="all", help="dev, test or all (default: all)")
    ext.add_argument("--show", action="store_true", help="print every disagreement")
    return parser


def extraction(args: argparse.Namespace) -> int:
    from pytest_searcheval.engine.extract import score_extraction

    collection = _load(args.collection)
    try:
        queries = collection.queries_in(args.split)
    except KeyError as exc:
        _say(f"error: --split: {exc.args[0]}")
        return 2
    scores, lines = score_extraction(
        ((q.id, q.text, q.constraints) for q in queries), collection.assets
    )
    print(f"{len(queries)} queries ({args.split})")
    print(f"{'field':<14}{'labelled':>9}{'found':>7}{'missed':>8}{'wrong':>7}{'spurious':>10}")
    for key, sc in scores.items():
        print(f"{key:<14}{sc.labelled:>9}{sc.found:>7}{sc.missed:>8}{sc.wrong:>7}{sc.spurious:>10}")
    if args.show:
        for line in lines:
            print(line)
    return 0


def write_rules(args: argparse.Namespace) -> int:
    from pytest_searcheval.engine import calibrate

    collection = _load(args.collection)
    with _start(args, collection) as engine:
        status = engine.calibration.get("status", "")
        if not status.startswith("calibrated"):
            _say(f"error: no rules to write: {engine.calibration.get('reason', status)}")
            return 2
        rules = dict(engine.settings.no_result or {})
    text = calibrate.rules_json(rules)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        from pytest_searcheval.files import atomic_writer

        with atomic_writer(Path(args.out)) as out:
            out.write(text)
    _say(f"{len(rules)} rules -> {args.out} ({status})")
    return 0


def _load(path: str) -> Collection:
    from pytest_searcheval.collection import load

    return load(path)


def _start(args: argparse.Namespace, collection: Collection) -> Engine:
    from pytest_searcheval.engine.core import Engine, EngineSettings

    settings = EngineSettings(cache_dir=args.cache_dir, reranker_path=args.reranker)
    return Engine.start(collection, dsn=args.dsn, settings=settings)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Stop:
    """The running HTTP server, if any, for the signal handler to stop; the signal it got."""

    def __init__(self) -> None:
        self.server: Any = None
        self.signum: int | None = None

    def on_signal(self, signum: int) -> bool:
        if self.server is None:
            return False  # not serving yet: raise, so that indexing unwinds
        self.signum = signum
        self.server.should_exit = True
        return True


def serve(args: argparse.Namespace, stop: _Stop | None = None) -> int:
    import secrets

    import uvicorn

    from pytest_searcheval.engine.app import create_app
    from pytest_searcheval.engine.connections import ConnectionLimits, uvicorn_options
    from pytest_searcheval.engine.service import warm

    _Server = _server_class()

    if not 0 <= args.port <= 65535:
        _say(f"error: --port: expected 0..65535, got {args.port}")
        return 2
    if args.max_connections is not None and args.max_connections < 1:
        _say(f"error: --max-connections: expected a positive integer, got {args.max_connections}")
        return 2
    if not 0 < args.header_timeout <= 3600:
        _say(f"error: --header-timeout: expected seconds in (0, 3600], got {args.header_timeout}")
        return 2
    if not 0 < args.body_timeout <= 3600:
        _say(f"error: --body-timeout: expected seconds in (0, 3600], got {args.body_timeout}")
        return 2
    limits = ConnectionLimits(
        max_connections=args.max_connections,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
    )
    collection = _load(args.collection)
    token: str | None = None
    if not args.no_admin:
        token = args.token or os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
    # Bind before indexing: a busy port fails fast, and --port 0 reports the chosen port.
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP so that asyncio sets TCP_NODELAY on accepted sockets (see service.py).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        _say(f"error: cannot listen on {args.host}:{args.port}: {exc}")
        return 2
    t0 = time.perf_counter()
    with contextlib.closing(sock), _start(args, collection) as engine:
        facts = engine.describe()
        _say(
            f"indexed {facts.get('documents')} documents in {time.perf_counter() - t0:.1f} s"
            f" (schema {facts.get('schema')}, PostgreSQL {facts.get('postgres')},"
            f" pgvector {facts.get('pgvector')})"
        )
        for line in facts.get("reaped") or ():
            _say(f"removed what a dead run left: {line}")
        unavailable = {p: r for p, r in engine.profiles().items() if r is not None}
        for profile, reason in unavailable.items():
            _say(f"profile {profile} unavailable: {reason}")
        if token is not None and not (args.token or os.environ.get(TOKEN_ENV)):
            _say(f"admin token: {token}")
        app = create_app(engine, admin_token=token)
        warmed = warm(engine)
        _say(f"warmed in {warmed:.1f} s (model loaded, every usable profile searched once)")
        port = sock.getsockname()[1]
        host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
        server = _Server(
            uvicorn.Config(
                app,
                log_level="info",
                lifespan="off",
                timeout_graceful_shutdown=10,
                **uvicorn_options(limits),
            )
        )
        if stop is not None:
            stop.server = server
        # The socket listens only from here on: a client connecting earlier is refused, never
        # kept waiting behind indexing and the model load.
        _say(f"serving on http://{host}:{port}/discovery/search (Ctrl-C stops)")
        server.run(sockets=[sock])
        if stop is not None:
            stop.server = None
    if stop is not None and stop.signum is not None:
        from pytest_searcheval.engine.lifecycle import Stopped

        return _stopped(Stopped(stop.signum))
    return 0


def _stopped(exc: Stopped) -> int:
    """The unwind after a stop signal is over: say whether it cleaned up, and how it ended.

    "cleaned up" only when it is so: no directory of an embedded server this process started
    is left and no postgres runs in one; what is left is removed now, and named if that fails.
    """
    from pytest_searcheval.engine.lifecycle import (
        ignore_stop_signals,
        own_leftovers,
        remove_own_leftovers,
    )

    ignore_stop_signals()
    left = own_leftovers()
    if left:
        _say(f"{exc}: the cleanup left {'; '.join(left)}; removing it")
        left = remove_own_leftovers()
    if left:
        _say(f"{exc}: NOT cleaned up: {'; '.join(left)} remain")
    else:
        _say(f"{exc}: cleaned up")
    return exc.exit_status


def _server_class() -> type:
    from pytest_searcheval.engine.connections import Server as ServiceServer

    class Server(ServiceServer):
        """uvicorn's server (with the service's log limits) without its own signal handling:
        uvicorn re-raises a captured SIGTERM after shutdown, which would end the process before
        our cleanup; main() handles them."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server


def _run_rows(results: Sequence[Mapping[str, Any]]) -> dict[str, float] | list[str]:
    ids = [str(r["id"]) for r in results]
    scores = [float(r["score"]) for r in results]
    if all(a > b for a, b in itertools.pairwise(scores)):
        return dict(zip(ids, scores, strict=True))
    return ids


def run(args: argparse.Namespace) -> int:
    from pytest_searcheval.collection import write_trec_run
    from pytest_searcheval.files import atomic_writer

    if not 1 <= args.limit <= 1000:
        _say(f"error: --limit: expected 1..1000, got {args.limit}")
        return 2
    tag = args.tag or args.profile
    collection = _load(args.collection)
    try:
        queries = collection.queries_in(args.split)
    except KeyError as exc:
        _say(f"error: --split: {exc.args[0]}")
        return 2
    t0 = time.perf_counter()
    with _start(args, collection) as engine:
        reason = engine.profiles().get(args.profile)
        if reason is not None:
            _say(f"error: profile {args.profile} is unavailable: {reason}")
            return 1
        indexed = time.perf_counter() - t0
        t1 = time.perf_counter()
        run_: dict[str, dict[str, float] | list[str]] = {}
        empty = 0
        for query in queries:
            body = engine.search(
                query.text, profile=args.profile, limit=args.limit, extract=not args.no_extract
            )
            rows = _run_rows(body["results"])
            if rows:
                run_[query.id] = rows
            else:
                empty += 1
        searched = time.perf_counter() - t1
    if args.out == "-":
        lines = write_trec_run(run_, sys.stdout, tag=tag)
    else:
        # /dev/null or a FIFO is written into; a regular file is replaced once complete
        with atomic_writer(Path(args.out)) as fh:
            lines = write_trec_run(run_, fh, tag=tag)
    _say(
        f"{len(queries)} queries ({args.split}), {empty} with no result, {lines} lines"
        f" -> {args.out}; indexing {indexed:.1f} s, searching {searched:.2f} s"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_searcheval.collection.model import CollectionError
    from pytest_searcheval.engine.db import DatabaseError
    from pytest_searcheval.engine.lifecycle import Stopped, stop_on_signals

    args = _parser().parse_args(argv)
    stop = _Stop()
    # SIGTERM, SIGINT and SIGHUP unwind every `with` below (schema dropped, PostgreSQL stopped,
    # its directory removed) and end with status 128 + N; while uvicorn serves, they stop it.
    with stop_on_signals(stop.on_signal, say=_say):
        try:
            if args.command == "serve":
                return serve(args, stop)
            if args.command == "extraction":
                return extraction(args)
            if args.command == "rules":
                return write_rules(args)
            return run(args)
        except CollectionError as exc:
            _say(f"error: {exc}")
            return 2
        except DatabaseError as exc:
            _say(f"error: {exc}")
            return 2
        except Stopped as exc:
            return _stopped(exc)
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main())

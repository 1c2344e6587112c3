"""schemathesis against the engine's published OpenAPI document, offline and bounded.

Starts ``python -m pytest_searcheval.engine serve`` on 127.0.0.1 (a free port, an admin token
of its own) on a collection, points ``schemathesis run`` at ``/openapi.json`` with that token,
and stops the server with SIGTERM (which must leave nothing behind). Every request goes to the
loopback address; the run is bounded by ``--max-examples`` per operation and ``--timeout``.

    python benchmarks/fuzz_openapi.py [--collection DIR] [--max-examples N] [--checks LIST]

Exit status: schemathesis's (0 when every check passed), or 2 when the server did not start.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# negative_data_rejection and positive_data_acceptance are left out: a string the schema allows
# can still be refused for what no schema states (a query of spaces only, an unknown asset code),
# and the service answers such input with a 400 naming the parameter, which is the promise.
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance,response_headers_conformance,ignored_auth,"
    "unsupported_method,missing_required_header"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default=None, help="default: a small synthetic one")
    parser.add_argument("--max-examples", type=int, default=40, help="per operation")
    parser.add_argument("--checks", default=CHECKS)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for the whole run")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="searcheval-fuzz-") as tmp:
        collection = args.collection
        if collection is None:
            sys.path.insert(0, str(ROOT))
            from pytest_searcheval.x402.synth import write_synthetic

            collection = str(write_synthetic(Path(tmp) / "synth", n_docs=60, n_queries=8))
        token = secrets.token_urlsafe(24)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        server = subprocess.Popen(
            [sys.executable, "-m", "pytest_searcheval.engine", "serve", "--collection",
             collection, "--host", "127.0.0.1", "--port", "0", "--token", token],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        lines: list[str] = []
        found: list[str] = []

        def read() -> None:
            assert server.stdout is not None
            for line in server.stdout:
                lines.append(line.rstrip())
                m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
                if m:
                    found.append(m.group(1))

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 300
        while not found:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                print("\n".join(lines), file=sys.stderr)
                print("error: the engine did not start", file=sys.stderr)
                return 2
            time.sleep(0.1)
        base = found[0]
        print(f"fuzzing {base}/openapi.json (checks: {args.checks})", flush=True)
        try:
            run = subprocess.run(
                ["schemathesis", "run", f"{base}/openapi.json",
                 "--header", f"Authorization: Bearer {token}",
                 "--checks", args.checks,
                 "--max-examples", str(args.max_examples),
                 "--phases", "examples,coverage,fuzzing",
                 "--seed", str(args.seed),
                 "--request-timeout", "30",
                 "--workers", "1",
                 "--no-color"],
                timeout=args.timeout, check=False,
            )  # fmt: skip
            status = run.returncode
        except subprocess.TimeoutExpired:
            print(f"error: schemathesis ran past {args.timeout:g} s", file=sys.stderr)
            status = 1
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
        errors = [line for line in lines if "Traceback" in line or "internal error" in line]
        if errors:
            print("\n".join(lines[-60:]), file=sys.stderr)
            print("error: the server logged a traceback", file=sys.stderr)
            status = status or 1
        return status


if __name__ == "__main__":
    sys.exit(main())

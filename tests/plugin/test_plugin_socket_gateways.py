"""pytest-xdist's own socket gateways spread the evaluation over execnet socket servers (here
two on 127.0.0.1, as two hosts would run them) and the report equals a serial run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_helpers import make_project, read_report, without_timings

# Each test starts other processes (xdist workers, gateways or a user's run): slow.
pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]


def _socket_server(cwd: Path) -> tuple[subprocess.Popen[str], int]:
    """execnet's socket server on 127.0.0.1 and a free port; returns it and its port."""
    import execnet

    script = Path(execnet.__file__).parent / "script" / "socketserver.py"
    proc = subprocess.Popen(
        [sys.executable, "-u", str(script), "127.0.0.1:0"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "... Entering Accept loop ('127.0.0.1', PORT)"
    if "Accept loop" not in line:
        proc.kill()
        raise AssertionError(f"socket server did not start: {line!r}")
    port = int(line.rsplit(",", 1)[1].strip(" )\n"))
    return proc, port


@pytest.fixture
def two_socket_servers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    # One failing query, so failures are compared too; set before the servers start, as the
    # workers inherit the servers' environment, not the controller's.
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")
    servers = [_socket_server(pytester.path) for _ in range(2)]
    try:
        yield [port for _, port in servers]
    finally:
        for proc, _ in servers:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def test_two_socket_gateways_give_the_serial_report(
    pytester: pytest.Pytester, two_socket_servers: list[int]
) -> None:
    make_project(pytester)
    args = ("--search-eval", "-p", "no:cacheprovider")
    serial = pytester.runpytest_subprocess(*args, "-p", "xdist", "-n", "0")
    serial_report = read_report(pytester)
    gateways = [f"--tx=socket=127.0.0.1:{port}" for port in two_socket_servers]
    spread = pytester.runpytest_subprocess(*args, "-p", "xdist", "--dist=load", "-v", *gateways)
    spread_report = read_report(pytester)
    out = spread.stdout.str()
    assert "[gw0]" in out and "[gw1]" in out, out[-3000:]
    assert serial.ret == spread.ret == 1
    assert spread_report["run"]["xdist_workers"] == 2
    assert serial_report["run"]["xdist_workers"] == 0
    a, b = (json.dumps(without_timings(r), sort_keys=True) for r in (serial_report, spread_report))
    assert a == b

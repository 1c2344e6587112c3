"""pytest-xdist transport: each worker ships its records to the controller in
``workeroutput`` at the end of its session (not in ``user_properties``, which ``--junitxml``
would write into the XML), and the controller merges them by key as a serial run does.

Workers also ship what they learned of the target (its facts, the resolved profiles, the
profiles found unavailable) so the controller, which runs no test, can report them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_searcheval.plugin.state import EvalState

WORKER_OUTPUT_KEY = "searcheval"


def send(state: EvalState, config: pytest.Config) -> None:
    payload = {
        "facts": state.facts,
        "unavailable": state.unavailable,
        "resolved": state.resolved,
        "records": state.records,
        "phases": state.phases,
    }
    # pytest-xdist sets workeroutput on a worker's Config; pytest's Config does not declare it.
    config.workeroutput[WORKER_OUTPUT_KEY] = json.dumps(payload, default=str)  # type: ignore[attr-defined]


class XdistTransport:
    """Controller side (registered only when pytest-xdist is present)."""

    def __init__(self, state: EvalState) -> None:
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {}) or {}
        raw = output.get(WORKER_OUTPUT_KEY)
        if raw is None:
            return
        worker = str(output.get("workerid", getattr(node.gateway, "id", "?")))
        self.state.worker_payloads[worker] = json.loads(raw)

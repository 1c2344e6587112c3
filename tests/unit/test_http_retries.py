"""HttpTarget retries transient failures with backoff and says how often it asked."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from pytest_searcheval.targets import HttpTarget, SearchFailed, TargetUnreachable

Handler = Callable[[httpx.Request], httpx.Response]


def _target(handler: Handler, **kw: float) -> tuple[HttpTarget, list[float]]:
    target = HttpTarget("http://search.test/s?q={query}", timeout=1.0, **kw)  # type: ignore[arg-type]
    target._client = httpx.Client(transport=httpx.MockTransport(handler))
    waits: list[float] = []
    return target, waits


def _sequence(*answers: int | Exception) -> Handler:
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if answer == 200:
            return httpx.Response(200, json={"results": [{"id": "d1", "score": 1.0}]})
        return httpx.Response(answer, text="busy")

    return handler


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)
    return slept


def test_a_503_then_an_answer_is_an_answer(waits: list[float]) -> None:
    target, _ = _target(_sequence(503, 502, 200), backoff=0.25)
    assert target.search("q", profile="default").ids == ["d1"]
    assert waits == [0.25, 0.5]


def test_what_still_fails_names_url_and_attempts(waits: list[float]) -> None:
    target, _ = _target(_sequence(503, 503, 503))
    with pytest.raises(SearchFailed) as info:
        target.search("weather", profile="default")
    assert info.value.attempts == 3 and info.value.url == "http://search.test/s?q=weather"
    assert "HTTP 503" in str(info.value) and "3 attempts" in str(info.value)


def test_a_client_error_is_not_retried(waits: list[float]) -> None:
    target, _ = _target(_sequence(400))
    with pytest.raises(SearchFailed) as info:
        target.search("q", profile="default")
    assert info.value.attempts == 1 and waits == []


def test_no_connection_on_every_attempt_is_unreachable(waits: list[float]) -> None:
    refused = httpx.ConnectError("connection refused")
    target, _ = _target(_sequence(refused, refused), retries=1)
    with pytest.raises(TargetUnreachable, match=r"connection refused.*2 attempts"):
        target.search("q", profile="default")
    target, _ = _target(_sequence(refused, 404))
    target.preflight()  # any answer, an error status included, is an answer


def test_retries_can_be_turned_off(waits: list[float]) -> None:
    target, _ = _target(_sequence(httpx.ReadTimeout("slow")), retries=0)
    with pytest.raises(TargetUnreachable, match=r"timed out after 1 s.*1 attempt"):
        target.search("q", profile="default")


def test_a_template_without_profile_serves_one_profile() -> None:
    target, _ = _target(_sequence(200))
    assert target.profiles() == {"default": None}
    with pytest.raises(ValueError, match=r"'nope': the URL template .*s\?q=\{query\} has no"):
        target.search("q", profile="nope")
    templated = HttpTarget("http://search.test/s?q={query}&mode={profile}")
    assert templated.profiles() == {}  # every configured profile is asked, by its name

"""The HTTP connections of the service: uvicorn's h11 protocol with the service's own answers.

uvicorn answers a request it cannot parse (a bad request line, a header without a colon, a
missing ``Host``, two ``Content-Length``, a broken chunk, an unknown ``Transfer-Encoding``,
a non-ASCII target) itself, before the application sees it, with a ``text/plain`` body.
:class:`ServiceProtocol` answers them in the service's JSON error shape
``{"error": <what was expected>, "field": null}`` and with h11's status hint (431 for a
header block past the limit, else 400).

:func:`uvicorn_options` is what ``serve`` and ``serve_in_thread`` pass to ``uvicorn.Config``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

__all__ = ["ServiceProtocol", "malformed_body", "uvicorn_options"]

#: how much of h11's reason (which quotes the client's bytes) the error body repeats
MAX_REASON_CHARS = 120


def malformed_body(reason: str) -> bytes:
    """The error body of a request the HTTP parser refused, ``reason`` being h11's words."""
    message = f"malformed HTTP/1.1 request ({reason}): expected a request line, headers and a body"
    return json.dumps({"error": message, "field": None}).encode("utf-8")


class ServiceProtocol(H11Protocol):
    """uvicorn's h11 protocol answering unparseable requests with the service's JSON body."""

    def send_400_response(self, msg: str) -> None:
        # Called from uvicorn's `except h11.RemoteProtocolError` block: the error is current.
        exc = sys.exc_info()[1]
        reason = str(exc) if isinstance(exc, h11.RemoteProtocolError) and str(exc) else msg
        status = getattr(exc, "error_status_hint", 400)
        if not 400 <= status < 500:
            status = 400
        reason = reason.rstrip(".")
        if len(reason) > MAX_REASON_CHARS:  # h11 quotes the offending bytes
            reason = reason[:MAX_REASON_CHARS] + "..."
        body = malformed_body(reason)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"connection", b"close"),
        ]
        try:
            head = self.conn.send(
                h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status])
            )
            self.transport.write((head or b"") + (self.conn.send(h11.Data(data=body)) or b""))
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            pass  # a response had already begun: nothing more can be said on this connection
        self.transport.close()


def uvicorn_options() -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config`` that every server of the service uses."""
    return {"http": ServiceProtocol}

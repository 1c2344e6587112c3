"""Why a test failed, as data: a code, a subject, parameters and the text a person reads.

The known-failure ledger stores ``code:subject`` keys, never the text, so rewording a message
cannot move a test between xfail and fail. The subject names what failed (a document, a pair of
queries, a filter field); the parameters carry the evidence that may change from run to run
(a rank, an overlap value), so a known item that slips from rank 2 to rank 4 keeps its key while
a different missing item gets a new one.

Codes are kebab-case and stable; docs/invariants.md and docs/report.md list them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Codes that a baseline can never excuse: a result that breaks an applied hard filter.
NEVER_EXCUSED = frozenset({"filter-violation"})
#: Codes that compare against the previous baseline: meaningless once it is rewritten.
NOT_RECORDED = frozenset({"query-drop"})


@dataclass(frozen=True)
class Reason:
    """One reason a query test or an invariant case failed."""

    code: str
    text: str
    subject: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """What the ledger compares: ``code`` or ``code:subject``."""
        return f"{self.code}:{self.subject}" if self.subject else self.code

    @property
    def excusable(self) -> bool:
        return self.code not in NEVER_EXCUSED

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "text": self.text}
        if self.subject:
            out["subject"] = self.subject
        if self.params:
            out["params"] = dict(self.params)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reason:
        return cls(
            code=str(data["code"]),
            text=str(data.get("text", "")),
            subject=str(data.get("subject", "")),
            params=dict(data.get("params") or {}),
        )

    def __str__(self) -> str:
        return self.text


def texts(reasons: Iterable[Reason]) -> list[str]:
    return [r.text for r in reasons]

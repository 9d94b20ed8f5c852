"""schemas, level 0: secrets out of everything written or printed — the one redaction seam.

Takes the API key (`--api-key`, `OPENAI_API_KEY`) and the request headers
(`--header NAME:VALUE`, and the `Authorization` built from the key); gives a
`Redactor`, a callable that replaces every occurrence of each secret in a
text by `***`. A server that echoes what it was sent ("Incorrect API key
provided: Bearer sk-…") hands the key back inside its error text; whatever
keeps server text (the load client's records, validate's probes) passes it
through the run's `Redactor` before it is stored, so the key reaches no
record, CSV, JSON, Markdown or terminal.

Secrets are the key and every header value; of a value with an auth scheme
(`Bearer X`, `Basic X`, `Token X`) the credential X, so an echo reads
`Bearer ***`. A secret shorter than `MIN_SECRET_CHARS` (4) is not redacted:
so short a value is no secret worth the mangling of every text it happens
to appear in. Text cut short (a body read to a limit, a snippet) may end
inside a secret: a tail of `MIN_TAIL_CHARS` (6) or more that is the start
of a secret is redacted too (a shorter one gives away no more than a key's
well-known prefix, and would redact ordinary words).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["MIN_SECRET_CHARS", "MIN_TAIL_CHARS", "REDACTED", "Redactor"]

MIN_SECRET_CHARS = 4
MIN_TAIL_CHARS = 6
REDACTED = "***"
_SCHEMES = ("bearer ", "basic ", "token ", "apikey ")
_ELLIPSES = ("…", "...")


def _credential(value: str) -> str:
    """`value`, or the credential after its auth scheme when it has one."""
    value = value.strip()
    lowered = value.lower()
    for scheme in _SCHEMES:
        if lowered.startswith(scheme):
            return value[len(scheme) :].strip()
    return value


@dataclass(frozen=True, slots=True)
class Redactor:
    """Replaces each secret in a text by `***`; the identity when there are none."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        api_key: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> Redactor:
        """The secrets of one run: the key and every header value (see the module docstring)."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        found = [_credential(api_key)] if api_key else []
        found += [_credential(value) for _, value in pairs]
        kept = {s for s in found if len(s) >= MIN_SECRET_CHARS}
        # Longest first: a secret that holds another is replaced whole, leaving one marker.
        return cls(tuple(sorted(kept, key=lambda s: (-len(s), s))))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __call__(self, text: str) -> str:
        if not self.secrets or not text:
            return text
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return self._cut_tail(text)

    def _cut_tail(self, text: str) -> str:
        """A secret's start at the very end (before an ellipsis): the text was cut inside it."""
        body, ellipsis = text, ""
        for mark in _ELLIPSES:
            if body.endswith(mark):
                body, ellipsis = body[: -len(mark)], mark
                break
        for secret in self.secrets:
            for length in range(len(secret) - 1, MIN_TAIL_CHARS - 1, -1):
                if body.endswith(secret[:length]):
                    return body[:-length] + REDACTED + ellipsis
        return text

"""schemas, level 0: secrets out of everything written or printed — the one redaction seam.

Takes the API key (`--api-key`, `OPENAI_API_KEY`) and the request headers
(`--header NAME:VALUE`, the `Authorization` built from the key, the `Basic`
one a `--url` with `user:password@` makes); gives a `Redactor`, a callable
that replaces every occurrence of each secret in a text by `***`. A server
that echoes what it was sent ("Incorrect API key provided: Bearer sk-…", an
`X-Request-Id` that is the key) hands the key back inside its text; whatever
keeps server text (the load client's records, validate's checks, preflight's
sentences) passes it through the run's `Redactor` before it is stored or
shown, so the key reaches no record, CSV, JSON, Markdown or terminal.

Secrets are the key and every header value; of a value with an auth scheme
(`Bearer X`, `Basic X`, `Token X`) the credential X, so an echo reads
`Bearer ***`; of a `Basic` credential also what it encodes (`user:password`)
and the password alone. A secret shorter than `MIN_SECRET_CHARS` (4) is not
redacted: so short a value is no secret worth the mangling of every text it
happens to appear in.

Each secret is found in the forms an echo takes:

- as it is, in any case (`SK-ABC…`, `sk-abc…`: matched case-insensitively);
- base64-encoded, standard (`+/`) and URL-safe (`-_`), with and without its
  `=` padding: the whole secret encoded alone (`Basic dXNlcjpwYXNz`), and the
  secret encoded inside a longer base64 text (`Basic` of `user:KEY`, a JSON
  document encoded whole). There a secret starting at byte `3k + o` of the
  encoded bytes shows as one of three strings, one per offset `o`; as credential
  scanners do, each is searched for, cut to the characters that depend on the
  secret's bytes alone (2 or 3 characters at its start and 1 at its end mix
  with its neighbours' bits and stay, giving away at most 10 bits of it).
  Base64 is matched in its case: its letters' case is its data.

Overlapping secrets are redacted as one: no fragment of either stays. The
cost is one regular-expression scan of the text, linear in its length for a
run's handful of secrets.

Text cut short (a body read to a limit, a snippet) may end inside a secret
in any of these forms: a tail of `MIN_TAIL_CHARS` (6) or more that is the
start of one is redacted too (a shorter one gives away no more than a key's
well-known prefix, and would redact ordinary words).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["MIN_SECRET_CHARS", "MIN_TAIL_CHARS", "REDACTED", "Redactor"]

MIN_SECRET_CHARS = 4
MIN_TAIL_CHARS = 6
REDACTED = "***"
_SCHEMES = ("bearer ", "basic ", "token ", "apikey ")
_ELLIPSES = ("…", "...")
# Of a secret encoded after `o` other bytes (o = 0, 1, 2 of a 3-byte group), the leading
# base64 characters that also hold bits of those bytes.
_MIXED_LEAD = (0, 2, 3)
_URL_SAFE = str.maketrans("+/", "-_")


def _credential(value: str) -> str:
    """`value`, or the credential after its auth scheme when it has one."""
    value = value.strip()
    lowered = value.lower()
    for scheme in _SCHEMES:
        if lowered.startswith(scheme):
            return value[len(scheme) :].strip()
    return value


def _basic_parts(value: str) -> list[str]:
    """Of `Basic X`: what X encodes (`user:password`) and the password; else nothing."""
    value = value.strip()
    if not value.lower().startswith("basic "):
        return []
    try:
        decoded = base64.b64decode(value[len("basic ") :].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return []
    _, colon, password = decoded.partition(":")
    return [decoded, password] if colon else [decoded]


def _base64_forms(secret: str) -> set[str]:
    """The secret's base64 forms: alone (padded or not) and inside a longer text at each
    of the three byte offsets (only its own characters); standard and URL-safe alphabets."""
    raw = secret.encode()
    forms: set[str] = set()
    for offset, lead in enumerate(_MIXED_LEAD):
        encoded = base64.b64encode(bytes(offset) + raw).decode("ascii")
        own_chars = 8 * (offset + len(raw)) // 6  # the last one may mix with the next byte
        forms.add(encoded[lead:own_chars])
        if offset == 0:
            forms |= {encoded, encoded.rstrip("=")}
    forms |= {form.translate(_URL_SAFE) for form in forms}
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def _fold(text: str) -> str:
    """`text` in lower case, where that keeps its length (so indices still line up)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text


@dataclass(frozen=True, slots=True)
class _Form:
    """One way a secret shows in a text: its characters and whether case matters."""

    text: str
    any_case: bool

    def pattern(self) -> str:
        escaped = re.escape(self.text)
        return f"(?i:{escaped})" if self.any_case else escaped

    def tail(self, body: str) -> int:
        """The length of the longest start of this form (≥ MIN_TAIL_CHARS) ending `body`."""
        form = _fold(self.text) if self.any_case else self.text
        window = body[-(len(form) - 1) :] if len(form) > 1 else ""
        if self.any_case:
            window = _fold(window)
        start = window.find(form[0]) if window else -1
        while 0 <= start <= len(window) - MIN_TAIL_CHARS:
            if form.startswith(window[start:]):
                return len(window) - start
            start = window.find(form[0], start + 1)
        return 0


def _forms_of(secrets: tuple[str, ...]) -> tuple[_Form, ...]:
    secrets = tuple(s for s in secrets if len(s) >= MIN_SECRET_CHARS)
    found: dict[str, _Form] = {}
    for secret in secrets:
        found.setdefault(secret.lower(), _Form(secret, any_case=True))
    any_case = set(found)
    for secret in secrets:
        for encoded in _base64_forms(secret):
            if encoded.lower() not in any_case:  # else matched already, in any case
                found.setdefault(encoded, _Form(encoded, any_case=False))
    # Longest first: where several forms start at one place, the longest is taken whole.
    return tuple(sorted(found.values(), key=lambda f: (-len(f.text), f.text)))


def _replace(scan: re.Pattern[str], text: str) -> str:
    """Each run of overlapping secrets → one `***` (two that only touch stay two)."""
    spans: list[list[int]] = []
    for match in scan.finditer(text):
        start, end = match.span(1)
        if spans and start < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], REDACTED]
        last = end
    parts.append(text[last:])
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Redactor:
    """Replaces each secret in a text by `***`; the identity when there are none."""

    secrets: tuple[str, ...] = ()
    _forms: tuple[_Form, ...] = field(default=(), init=False, repr=False, compare=False)
    _scan: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        forms = _forms_of(self.secrets)
        object.__setattr__(self, "_forms", forms)
        if forms:
            # A lookahead finds every start, so overlapping secrets are all seen.
            alternatives = "|".join(form.pattern() for form in forms)
            object.__setattr__(self, "_scan", re.compile(f"(?=({alternatives}))"))

    @classmethod
    def of(
        cls,
        api_key: str | None = None,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> Redactor:
        """The secrets of one run: the key and every header value (see the module docstring)."""
        pairs = headers.items() if isinstance(headers, Mapping) else headers
        values = [api_key] if api_key else []
        values += [value for _, value in pairs]
        found = [_credential(value) for value in values]
        found += [part for value in values for part in _basic_parts(value)]
        kept = {s for s in found if len(s) >= MIN_SECRET_CHARS}
        return cls(tuple(sorted(kept, key=lambda s: (-len(s), s))))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __call__(self, text: str) -> str:
        if self._scan is None or not text:
            return text
        return self._cut_tail(_replace(self._scan, text))

    def _cut_tail(self, text: str) -> str:
        """A secret's start at the very end (before an ellipsis): the text was cut inside it."""
        body, ellipsis = text, ""
        for mark in _ELLIPSES:
            if body.endswith(mark):
                body, ellipsis = body[: -len(mark)], mark
                break
        length = max((form.tail(body) for form in self._forms), default=0)
        if length == 0:
            return text
        return body[:-length] + REDACTED + ellipsis

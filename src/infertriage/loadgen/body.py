"""loadgen, level 2: what a response says beside its events.

Takes a response's headers and the raw bytes of its body; gives the decoder of a body
compressed though none was asked (gzip and deflate, bounded per read), a short body
(an error, a JSON answer) as text, the replica a header names (`REPLICA_HEADERS`), and
whether a body's start or its content type is an HTML page. `response.StreamState`
reads through these, for both load engines.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["HTML_TYPES", "REPLICA_HEADERS", "body_text", "inflater", "is_html", "replica_of"]

# Response headers that name the replica (instance, pod) that served a request, first found
# wins: what gateways and routers in front of several engines add where configured.
REPLICA_HEADERS = ("x-served-by", "x-instance", "x-replica", "x-backend", "x-upstream")
# One read may inflate to at most this much: more is a compression bomb, not a stream.
_MAX_INFLATED_PER_READ = 64 << 20
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<!--")


def inflater(encoding: str) -> Callable[[bytes], bytes] | None:
    """A decoder for a body compressed as `encoding`; None: a coding not decoded."""
    if encoding in {"gzip", "x-gzip"}:
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = 32 + zlib.MAX_WBITS  # zlib-wrapped, as RFC 9110 says (auto-detects gzip too)
    else:
        return None
    inflate = zlib.decompressobj(wbits)

    def decode(data: bytes) -> bytes:
        out = inflate.decompress(data, _MAX_INFLATED_PER_READ)
        if inflate.unconsumed_tail:
            raise zlib.error(f"one read inflated past {_MAX_INFLATED_PER_READ} bytes")
        return out

    return decode


def body_text(data: bytes, encoding: str) -> str:
    """A short body (an error, a JSON answer) as text, decoded if it was compressed."""
    decode = inflater(encoding) if encoding and encoding != "identity" else None
    if decode is not None:
        with contextlib.suppress(zlib.error):
            data = decode(data)
    return data.decode("utf-8", "replace")


def replica_of(headers: Any) -> str | None:
    """The replica a response names (`REPLICA_HEADERS`), or None: one `get` per name."""
    for name in REPLICA_HEADERS:
        value = headers.get(name)
        if value:
            return str(value)
    return None


def is_html(head: bytes) -> bool:
    return head.lstrip()[:16].lower().startswith(_HTML_STARTS)

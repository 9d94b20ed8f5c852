"""The load client's redaction seam: the key never reaches a record's error text."""

from __future__ import annotations

import asyncio

from infertriage.loadgen.client import ClientConfig, RequestClient, StreamState, make_session
from infertriage.schemas import ErrorKind

from .conftest import spec

KEY = "sk-live-0123456789abcdefghij"


def _state() -> StreamState:
    config = ClientConfig(
        "http://127.0.0.1:9/v1", "m", api_key=KEY, headers=(("X-T", "tok-12345"),)
    )

    async def make() -> StreamState:
        async with make_session(config) as session:
            return RequestClient(config, session).new_state(spec(), 0)

    return asyncio.run(make())


def test_an_echoed_key_and_header_are_redacted_in_the_record() -> None:
    state = _state()
    state.fail(
        ErrorKind.HTTP, "http_4xx", f"HTTP 401: Incorrect API key provided: Bearer {KEY}; tok-12345"
    )
    record = state.record("r-0", 0)
    assert record.error_text == "HTTP 401: Incorrect API key provided: Bearer ***; ***"


def test_a_key_cut_by_the_length_limit_leaves_no_start_behind() -> None:
    state = _state()
    # the key straddles the 300-character limit of the error text
    state.fail(ErrorKind.HTTP, "http_4xx", "x" * 290 + KEY)
    assert KEY[:6] not in state.error_text and state.error_text.endswith("***")
    unredacted = StreamState(spec(), 0, chat=True)
    unredacted.fail(ErrorKind.HTTP, "http_4xx", "x" * 290 + KEY)
    assert KEY[:10] in unredacted.error_text  # without the client's redactor it would leak

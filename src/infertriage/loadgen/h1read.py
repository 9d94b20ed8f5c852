"""loadgen, level 2: one response read off an `h1` connection into its `StreamState`.

Takes a `StreamState` whose headers were read and an `H1Conn` whose body follows;
gives the state filled (the stream's events, stamped by the read that brought them,
or an error body's start) and whether the body ended, so the connection may carry
another request. The stream's events are read in the connection's own callback, a
piece at a time, as `client`'s aiohttp reader reads them: the read that completes
the `[DONE]` event is not counted among the reads (`client_bound`), nothing after it
counts, and the body's end is awaited briefly so the connection is reused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from infertriage.loadgen.h1 import H1Conn, H1Error
from infertriage.loadgen.response import StreamState

__all__ = ["DONE_GRACE_S", "read_some", "read_stream", "stream_reads"]

# After [DONE], wait at most this long for the body's end so the connection can be reused
# (both readers: `client`'s aiohttp one too).
DONE_GRACE_S = 0.5


def stream_reads(
    state: StreamState, counts: list[int], on_end: Callable[[], None] | None = None
) -> Callable[[list[bytes], int], bool]:
    """What one read of the event stream does to `state`, for both readers (`client`'s
    aiohttp one too): the read's body pieces, stamped `ns`, decoded, the body's head kept,
    their events parsed and taken; gives whether it was the read that brought the stream's
    end (the finish, usage and [DONE]: `on_end` is called). That read is not counted
    (`client_bound`); the others add one to `counts[0]` (reads) and their events to
    `counts[1]`. Raises what the parser or the decoder raised."""
    feed = state.parser.feed
    on_events = state.on_events
    decode = state.decode

    def take(pieces: list[bytes], ns: int) -> bool:
        state.last_ns = ns
        if decode is not None:
            pieces = [decode(piece) for piece in pieces]
        if not state.head:
            state.take_head(b"".join(pieces))
        if len(pieces) == 1:
            events = feed(pieces[0])
        else:  # each chunk an event, most often: each takes the parser's quick way
            events = [event for piece in pieces for event in feed(piece)]
        if events:
            on_events(events, ns)
        if state.done_ns is not None:
            if on_end is not None:
                on_end()
            return True
        counts[0] += 1
        counts[1] += len(events)
        return False

    return take


async def read_stream(state: StreamState, conn: H1Conn, counts: list[int]) -> bool:
    """Read the event stream into `state` (`counts`: reads and events, added to);
    raises what the body's parser or decoder raised, or the connection's `H1Error`."""
    # The read that brings [DONE] wakes the reader: nothing after it counts.
    conn.set_sink(stream_reads(state, counts, conn.wake))  # what came with the head at once
    ended = conn.ended
    if not ended and state.done_ns is None:
        ended = await conn.wait()
    if not ended:  # [DONE] came: the body's end, briefly, so the connection is reused
        try:
            async with asyncio.timeout(DONE_GRACE_S):
                ended = await conn.wait()
        except (TimeoutError, H1Error):
            ended = False
    return ended


async def read_some(conn: H1Conn, limit: int) -> tuple[bytes, bool]:
    """The start of a body, up to `limit` bytes: what the first read brought and what
    follows within a short grace; gives it and whether the body ended."""
    pieces: list[bytes] = []
    held = 0

    def sink(read: list[bytes], ns: int) -> None:
        nonlocal held
        for data in read:
            if held < limit:
                pieces.append(data)
                held += len(data)
        conn.wake(drop_rest=False)  # the first piece is enough to go on

    ended = False
    try:
        conn.set_sink(sink)
        if not held:
            ended = await conn.wait()  # the first piece, or the end
        if not ended:
            async with asyncio.timeout(DONE_GRACE_S):
                while not ended and held < limit:
                    ended = await conn.wait()
    except (TimeoutError, H1Error):
        ended = False
    return b"".join(pieces)[:limit], ended

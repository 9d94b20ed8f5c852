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


def stream_reads(state: StreamState) -> Callable[[list[bytes], int], int]:
    """What one read of the event stream does to `state`, for both readers (`client`'s
    aiohttp one too): the read's body pieces, stamped `ns`, decoded, the body's head kept,
    their events parsed and taken; gives the number of events, or -1 for the read that
    brought the stream's end (the finish, usage and [DONE]), which is not counted
    (`client_bound`). Raises what the parser or the decoder raised."""
    feed = state.parser.feed
    on_events = state.on_events
    decode = state.decode

    def take(pieces: list[bytes], ns: int) -> int:
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
        return -1 if state.done_ns is not None else len(events)

    return take


async def read_stream(state: StreamState, conn: H1Conn, counts: list[int]) -> bool:
    """Read the event stream into `state` (`counts`: reads and events, added to);
    raises what the body's parser or decoder raised, or the connection's `H1Error`."""
    take = stream_reads(state)
    reads = num_events = 0

    def sink(pieces: list[bytes], ns: int) -> None:
        nonlocal reads, num_events
        events = take(pieces, ns)
        if events < 0:
            conn.wake()  # the last read: nothing after it counts
            return
        reads += 1
        num_events += events

    try:
        conn.set_sink(sink)  # what came with the head is read at once
        ended = conn.ended
        if not ended and state.done_ns is None:
            ended = await conn.wait()
    finally:
        counts[0] += reads
        counts[1] += num_events
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

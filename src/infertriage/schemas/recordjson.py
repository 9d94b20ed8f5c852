"""schemas, level 0: a `RequestRecord` as its requests.jsonl line, quickly.

Takes a `RequestRecord`; gives the bytes `orjson.dumps` gives for it (with
`rundir`'s options), byte for byte, in a third of the time for a long stream.
orjson walks a slotted dataclass such as `Chunk` field by field (about 0.4 µs a
chunk, a record's largest cost in `bench`'s load loop); here each of the
chunks' three columns goes through orjson once, as a list, and the columns are
put back together in one format call. Any record that would not come out the
same (a chunk of another type, a value holding a comma) is dumped as before.
"""

from __future__ import annotations

from dataclasses import fields
from itertools import chain
from operator import attrgetter

import orjson

from infertriage.schemas.records import Chunk, RequestRecord

__all__ = ["DUMPS_OPTIONS", "dumps", "record_json"]

DUMPS_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_FIELDS = tuple(f.name for f in fields(RequestRecord))
_COLUMNS = tuple(attrgetter(f.name) for f in fields(Chunk))
# One chunk as orjson writes the dataclass: its fields in order, each value a column's piece.
_CHUNK = b"{" + b",".join(b'"%s":%%b' % f.name.encode() for f in fields(Chunk)) + b"},"
_KINDS = frozenset((Chunk,))


def dumps(value: object) -> bytes:
    """`value` as JSON, as every run file is written; a `RequestRecord` the quick way."""
    if type(value) is RequestRecord:
        return record_json(value)
    return orjson.dumps(value, option=DUMPS_OPTIONS)


def record_json(record: RequestRecord) -> bytes:
    """`orjson.dumps(record)`'s bytes, the chunks written column by column."""
    chunks = _chunks_json(record.chunks)
    if chunks is None:
        return orjson.dumps(record, option=DUMPS_OPTIONS)
    row = {name: getattr(record, name) for name in _FIELDS}
    row["chunks"] = orjson.Fragment(chunks)
    return orjson.dumps(row, option=DUMPS_OPTIONS)


def _chunks_json(chunks: tuple[Chunk, ...]) -> bytes | None:
    """The chunks' JSON array; None where the columns' way would not give orjson's bytes."""
    num = len(chunks)
    if not num:
        return b"[]"
    if not _KINDS.issuperset(map(type, chunks)):
        return None  # not all `Chunk`s: orjson's own way
    columns = []
    for column in _COLUMNS:
        pieces = orjson.dumps(list(map(column, chunks)), option=DUMPS_OPTIONS)[1:-1].split(b",")
        if len(pieces) != num:
            return None  # a value whose JSON holds a comma: the pieces would not line up
        columns.append(pieces)
    values = tuple(chain.from_iterable(zip(*columns, strict=True)))
    return b"[" + (_CHUNK * num % values)[:-1] + b"]"

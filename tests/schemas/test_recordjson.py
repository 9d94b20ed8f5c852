"""A record's requests.jsonl line, written column by column: byte for byte orjson's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from infertriage.schemas import (
    Chunk,
    ErrorKind,
    JsonlWriter,
    RequestRecord,
    TokenSource,
    read_jsonl,
)
from infertriage.schemas.recordjson import DUMPS_OPTIONS, dumps, record_json

ODD_FLOATS = [0.0, -0.0, 1e-7, 1.5e-5, 0.1, 1 / 3, 12345.678, 5e20, float("inf"), float("nan")]


def _record(chunks: tuple[Any, ...], **fields: Any) -> RequestRecord:
    given: dict[str, Any] = {
        "id": "r-1",
        "scheduled_ts": 0.25,
        "sent_ts": 0.5,
        "first_token_ts": 0.75,
        "labels": {"level": "c=32", "ü": 'ö,"x"'},
        "prompt_prefix": (("ab,c", 3),),
    }
    return RequestRecord(chunks=chunks, **(given | fields))


def _orjson(value: object) -> bytes:
    return orjson.dumps(value, option=DUMPS_OPTIONS)


@pytest.mark.parametrize("num", [0, 1, 2, 200])
def test_a_record_reads_the_same_as_orjson_writes_it(num: int) -> None:
    rng = np.random.default_rng(num)
    chunks = tuple(
        Chunk(float(rng.random() * 10.0 ** rng.integers(-8, 7)), int(rng.integers(4)), i % 3 > 0)
        for i in range(num)
    )
    record = _record(chunks, error_kind=ErrorKind.STREAM, output_tokens_source=TokenSource.USAGE)
    assert record_json(record) == _orjson(record)


def test_odd_numbers_read_the_same() -> None:
    chunks = tuple(Chunk(ts, 10**12 if i % 2 else 0, i % 4 == 0) for i, ts in enumerate(ODD_FLOATS))
    numpy_chunks = (Chunk(np.float64(0.5), np.int64(3)),)  # type: ignore[arg-type]
    for record in (_record(chunks, sent_ts=float("nan")), _record(numpy_chunks)):
        assert record_json(record) == _orjson(record)


@pytest.mark.parametrize(
    "chunks",
    [
        ((0.5, 1, False),),  # not a Chunk
        (Chunk(0.5, [1, 2]),),  # type: ignore[arg-type]  # a value whose JSON holds a comma
        (Chunk(0.5, 1), Chunk("a,b", 1)),  # type: ignore[arg-type]
    ],
)
def test_chunks_the_columns_cannot_write_are_written_by_orjson(chunks: tuple[Any, ...]) -> None:
    record = _record(chunks)
    assert record_json(record) == _orjson(record)


def test_other_values_are_orjsons() -> None:
    for value in ({"a": 1, 2: np.float32(0.5)}, [Chunk(0.5, 1)], "x"):
        assert dumps(value) == _orjson(value)


def test_the_writer_writes_it_and_it_reads_back(tmp_path: Path) -> None:
    record = _record((Chunk(0.125, 1), Chunk(0.25, 2, reasoning=True)), output_tokens=3)
    path = tmp_path / "requests.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(record)
    assert path.read_bytes() == _orjson(record) + b"\n"
    assert list(read_jsonl(path, RequestRecord)) == [record]

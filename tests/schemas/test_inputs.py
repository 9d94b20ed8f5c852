"""`schemas.inputs`: a YAML file is read at a bounded cost (no alias, a depth and a size
bound), a quoted value is short, and a gzip stream refuses to expand like a bomb.

A 500-byte "billion laughs" SLO file once gave a 312 MB error message and 969 MB of memory:
the aliases expanded into a list of 9⁹ strings that the error sentence quoted whole.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from tests.bounded import MIB, run_capped, write_gzip

from infertriage.schemas import UserError, load_thresholds
from infertriage.schemas.inputs import (
    GZIP_RATIO_FROM_BYTES,
    MAX_QUOTED_CHARS,
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    load_yaml,
    open_gunzip,
    quoted,
    read_small_text,
)
from infertriage.twin.scenario import load_scenario


def _bomb(key: str) -> str:
    """The issue's file: nine levels of nine aliases (9⁹ strings) under a key we know."""
    levels = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for name, previous in zip("bcdefghi", "abcdefgh", strict=True):
        levels.append(f"&{name} [{', '.join(['*' + previous] * 9)}]")
    return f"{key}: [{', '.join(levels)}]\n"


def _one_sentence(err: pytest.ExceptionInfo[UserError], *needles: str) -> str:
    message = str(err.value)
    assert message.endswith(".") and "\n" not in message and len(message) < 400, message
    for needle in needles:
        assert needle in message, message
    return message


def test_an_alias_bomb_is_one_short_sentence(tmp_path: Path) -> None:
    assert len(_bomb("ttft_p95")) < 600
    path = tmp_path / "slo.yaml"
    path.write_text(_bomb("ttft_p95"), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_thresholds(str(path))
    _one_sentence(err, "SLO file", "anchor or alias at line 1", "write each value out")
    path.write_text(_bomb("description"), encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_scenario(str(path))
    _one_sentence(err, "scenario", "anchor or alias")


def test_an_alias_bomb_costs_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(_bomb("ttft_p95"), encoding="utf-8")
    out = run_capped(
        "from infertriage.schemas import UserError, load_thresholds\n"
        "try:\n"
        f"    load_thresholds({str(path)!r})\n"
        "except UserError as err:\n"
        "    print(len(str(err)))\n",
        limit_bytes=512 * MIB,
    )
    assert int(out) < 400


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("x: &anchor 1\n", "anchor or alias at line 1"),
        ("base: {a: 1}\nother:\n  <<: *base\n", "anchor or alias at line 3"),
        ("[" * 100_000 + "]" * 100_000, f"nests deeper than {MAX_YAML_DEPTH} levels"),
        ("a: " + "9" * 5000 + "\n", "holds a value YAML cannot read"),
        ("a: \x00\n", "is not valid YAML"),
        ("a: [1, 2\n", "is not valid YAML at line 2"),
        ("x" * (MAX_YAML_BYTES + 1), "larger than 256 KiB"),
    ],
)
def test_documents_past_a_bound_are_one_sentence(text: str, needle: str) -> None:
    with pytest.raises(UserError) as err:
        load_yaml(text, "SLO file s.yaml")
    _one_sentence(err, "SLO file s.yaml", needle)


def test_the_bounds_leave_our_files_alone() -> None:
    deepest = MAX_YAML_DEPTH - 1  # lists, then the scalar inside the last one
    assert load_yaml("[" * deepest + "1" + "]" * deepest, "f") is not None
    with pytest.raises(UserError, match="nests deeper"):
        load_yaml("[" * MAX_YAML_DEPTH + "1" + "]" * MAX_YAML_DEPTH, "f")
    assert load_yaml("ttft_p95: 200ms\nitl_p95: 50ms\n", "f") == {
        "ttft_p95": "200ms",
        "itl_p95": "50ms",
    }
    assert load_yaml("# only a comment\n", "f") is None


def test_a_quoted_value_is_short_whatever_it_is() -> None:
    for value in ("x" * 10_000, list(range(10_000)), {"a": [[[[1]]]]}, 10**5000, b"\x00" * 999):
        text = quoted(value)
        assert len(text) <= MAX_QUOTED_CHARS
    assert quoted("ttft") == "'ttft'"
    assert quoted("x" * 500).endswith("…")


def test_an_slo_value_quoted_in_an_error_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text("ttft_p95: " + "9ms " * 20_000 + "\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_thresholds(str(path))
    _one_sentence(err, "invalid value", "…")
    path.write_text("? " + "x" * 50_000 + "\n: 1\n", encoding="utf-8")  # an explicit long key
    with pytest.raises(UserError) as err:
        load_thresholds(str(path))
    _one_sentence(err, "unknown SLO")


def test_files_that_are_not_small_text(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_YAML_BYTES)
    with pytest.raises(UserError) as err:
        read_small_text(big, "SLO file big.yaml")
    _one_sentence(err, "larger than")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError) as err:
        load_thresholds(str(binary))
    _one_sentence(err, "not a text file")
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    with pytest.raises(UserError) as err:
        load_scenario(str(folder))
    _one_sentence(err, "not a regular file")


def test_a_gzip_stream_refuses_a_bomb_and_keeps_what_came_before_a_cut(tmp_path: Path) -> None:
    count = GZIP_RATIO_FROM_BYTES // MIB + 8
    bomb = write_gzip(tmp_path / "bomb.gz", b"", b"\0" * MIB, count)
    with (
        bomb.open("rb") as raw,
        open_gunzip(raw, "bomb.gz") as stream,
        pytest.raises(UserError) as err,
    ):
        while stream.read(MIB):
            pass
    _one_sentence(err, "bomb.gz expands more than 100-fold", "gzip bomb")
    whole = gzip.compress(b"line\n" * 100_000)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    lines = 0
    with cut.open("rb") as raw, open_gunzip(raw, "cut.gz") as stream, pytest.raises(EOFError):
        while stream.readline():
            lines += 1
    assert lines > 0  # the lines before the cut came out first

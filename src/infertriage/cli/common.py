"""cli, level 6: helpers every command shares."""

from __future__ import annotations

import sys

import orjson


def print_json(document: object) -> None:
    """`--json`: one JSON document on stdout and nothing else there."""
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()

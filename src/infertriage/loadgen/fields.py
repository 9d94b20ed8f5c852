"""loadgen, level 2: the checks of an event's fields, and what a failed one says.

Takes one field's value as decoded from an event's JSON; gives whether a text field
carries text (a string, or an array of content parts), that text, and for a field of
the wrong JSON type or a token count that is not one a `BadField` naming its fault
(`bad_shape`, `bad_count`) and saying what was found. `response.StreamState` raises
and catches these while it reads an event.
"""

from __future__ import annotations

__all__ = ["MAX_TOKEN_COUNT", "BadField", "carries", "not_count", "part_texts", "shape"]

# More tokens than any context holds or any request produces: a count past it is not one.
MAX_TOKEN_COUNT = 100_000_000
_JSON_NAMES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


class BadField(Exception):
    """A field of an event that is not what the API says it is."""

    def __init__(self, fault: str, text: str) -> None:
        super().__init__(text)
        self.fault = fault


def shape(where: str, value: object, wanted: str) -> BadField:
    got = _JSON_NAMES.get(type(value), type(value).__name__)
    return BadField("bad_shape", f"the event's `{where}` is {got}, not {wanted}: {value!r:.80}")


def not_count(where: str, value: object) -> BadField:
    text = f"`{where}` is {value!r:.40}, not a token count (a whole number 0–{MAX_TOKEN_COUNT})"
    return BadField("bad_count", text)


def carries(where: str, value: object) -> bool:
    """Does a text field that is there carry text? A string, or an array of content parts
    (`[{"type": "text", "text": …}]`); anything else is `bad_shape`."""
    kind = type(value)
    if kind is str or kind is list:
        return bool(value)
    if value is None:
        return False
    raise shape(where, value, "a string")


def part_texts(value: object) -> str:
    """The text an output field carries, for the local tokenizer's cross-check."""
    if type(value) is str:
        return value
    parts = value if type(value) is list else []
    return "".join(p["text"] for p in parts if type(p) is dict and type(p.get("text")) is str)

"""Print a pip constraints file pinning every direct dependency to its declared floor.

    python scripts/floors.py [EXTRA ...] > floors.txt
    pip install -c floors.txt -e '.[dev]'

`make test-lowest` installs the package this way into its own environment and runs every
command once: each `>=` in pyproject.toml is a release the tool works at, not a guess.
What a requirement names without a floor (`types-PyYAML`) or pins exactly is left as it is;
markers (`; sys_platform != 'win32'`) are kept. Standard library only.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*([^;]*)(;.*)?$")
_FLOOR = re.compile(r">=\s*([^,\s]+)")


def floor_pin(requirement: str) -> str | None:
    """'aiohttp>=3.12.7,<4' -> 'aiohttp==3.12.7'; None when it declares no floor."""
    found = _REQUIREMENT.match(requirement)
    if found is None:
        return None
    name, _extras, spec, marker = found.groups()
    floor = _FLOOR.search(spec or "")
    if floor is None:
        return None
    return f"{name}=={floor.group(1)}{(' ' + marker) if marker else ''}"


def pins(requirements: Iterable[str]) -> list[str]:
    unique: dict[str, str] = {}
    for requirement in requirements:
        pin = floor_pin(requirement)
        if pin is not None:
            unique.setdefault(pin.split("==")[0].lower(), pin)
    return list(unique.values())


def main(extras: Sequence[str]) -> int:
    project = tomllib.loads(
        Path(__file__).resolve().parents[1].joinpath("pyproject.toml").read_text()
    )["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    print("\n".join(pins(requirements)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""schemas, level 0: the one user-error type.

Everything that is the user's fault (a bad flag, a malformed file, a wrong
URL) raises `UserError` with one sentence. The CLI prints that sentence on
stderr and exits with code 2; no traceback. Programming errors stay ordinary
exceptions.
"""

from __future__ import annotations

__all__ = ["EXIT_USER_ERROR", "UserError"]

EXIT_USER_ERROR = 2


class UserError(Exception):
    """A problem the user can fix; `str(err)` is one sentence that says what and where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

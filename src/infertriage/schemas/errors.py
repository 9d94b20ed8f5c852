"""schemas, level 0: the one user-error type, and the exit codes that are not 0 or 1.

Everything that is the user's fault (a bad flag, a malformed file, a wrong
URL) raises `UserError` with one sentence. The CLI prints that sentence on
stderr and exits with code 2; no traceback. Programming errors stay ordinary
exceptions.

Exit codes: 0 success; 1 a verdict against the target (not ready, a
regression); `EXIT_USER_ERROR` 2; `EXIT_INCONCLUSIVE` 3, `compare
--fail-on-regression` when no metric regressed but one could not be judged;
`EXIT_INTERRUPTED` 130, Ctrl-C: the command stopped early, kept what it
measured and raised `Interrupted` with one sentence on what that is;
`EXIT_HANGUP` 129 and `EXIT_TERMINATED` 143, the same for SIGHUP (a closed
terminal) and SIGTERM (`timeout`, `docker stop`, Kubernetes): 128 + the
signal's number, as a shell reports a death by that signal. A full disk or
a closed standard output is `EXIT_USER_ERROR`, one sentence, what was
written kept. A new code gets its name here, so that two commands never
give one number two meanings.
"""

from __future__ import annotations

__all__ = [
    "EXIT_HANGUP",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
    "EXIT_NO_SUCCESS",
    "EXIT_TERMINATED",
    "EXIT_USER_ERROR",
    "Interrupted",
    "UserError",
]

EXIT_USER_ERROR = 2
EXIT_INCONCLUSIVE = 3
EXIT_NO_SUCCESS = 4  # `bench`: a load level in which no request succeeded
EXIT_INTERRUPTED = 130
EXIT_HANGUP = 129
EXIT_TERMINATED = 143


class UserError(Exception):
    """A problem the user can fix; `str(err)` is one sentence that says what and where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class Interrupted(Exception):
    """Ctrl-C, SIGTERM or SIGHUP cut the command short; `str(err)` says in one sentence
    what was kept."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

"""The one error type users see: bad input, reported as one line.

The CLI prints ``str(error)`` and exits 2; the Python API raises it for the
caller to handle. Messages name the file, the field and what was expected.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: the CLI prints ``str(self)`` as one line and exits 2.

    The message names the file, the field and what was expected.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

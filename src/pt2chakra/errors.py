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
        super().__init__(printable(f"{path}: {problem}"))
        self.path = path
        self.problem = problem


# Characters a terminal acts on (C0 and C1 controls, DEL) and the line and
# paragraph separators: in a name from a trace they could rewrite the screen
# or fake a line of output, so they are shown escaped.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7f, 0xa0))}
_CONTROL.update({0x2028: "\\u2028", 0x2029: "\\u2029"})


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters escaped
    (``\\x1b``, ``\\n``...), everything else as is."""
    if text.isprintable():
        return text
    return text.translate(_CONTROL)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a character ``printable`` escapes."""
    return any(ord(c) in _CONTROL for c in text)

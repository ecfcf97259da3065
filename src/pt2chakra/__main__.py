"""``python -m pt2chakra``.

A signal that comes while the command line is still being imported (a
second or more on a loaded machine) ends the process at once, with the
status a shell expects (128 + the signal) and no traceback: nothing has been
read or written yet. ``cli.options.session`` then takes over, for the
command itself (temp files removed, workers and children stopped).
"""

import os
import signal


def _stop_before_start(signum: int, _frame: object) -> None:
    """``cli.stop_before_start``, before that module can be imported."""
    os._exit(128 + signum)


for _signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signum, _stop_before_start)

from pt2chakra.cli import run  # noqa: E402 - after the handlers, on purpose

run()

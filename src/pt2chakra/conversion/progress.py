"""Progress on stderr for work that takes more than a moment."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class Stages:
    """Progress on stderr for work that takes more than a moment: one line
    per stage when stderr is a terminal (or forced), silent otherwise."""

    def __init__(self, total: int, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.t0 = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        log.debug("stage %d/%d: %s", self.done, self.total, what)
        if self.enabled:
            elapsed = time.perf_counter() - self.t0
            sys.stderr.write(f"\r[{self.done}/{self.total}] {what} ({elapsed:.1f}s)\x1b[K")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def counting(self, items: Iterable[T], total: int, what: str,
                 weigh: Callable[[T], int] | None = None) -> Iterable[T]:
        """``items`` unchanged; with progress on, a bar of ``what`` done so far
        (redrawn at most every PROGRESS_REDRAW_S so that it costs nothing).
        ``weigh``: how many of ``total`` an item stands for (a batch of
        nodes: its count); None: one each."""
        if not self.enabled or total <= 0:
            return items
        return self._bar(items, total, what, weigh)

    def _bar(self, items: Iterable[T], total: int, what: str,
             weigh: Callable[[T], int] | None) -> Iterator[T]:
        next_draw = time.perf_counter() + PROGRESS_REDRAW_S
        count = next_check = 0
        for item in items:
            count += 1 if weigh is None else weigh(item)
            if count >= next_check:  # the clock read once per PROGRESS_CHECK_EVERY
                next_check = count + PROGRESS_CHECK_EVERY
                if time.perf_counter() >= next_draw:
                    next_draw += PROGRESS_REDRAW_S
                    self._draw(count, total, what)
            yield item

    def _draw(self, count: int, total: int, what: str) -> None:
        filled = PROGRESS_WIDTH * count // total
        sys.stderr.write(f"\r[{self.done + 1}/{self.total}] {what} "
                         f"[{'#' * filled}{'.' * (PROGRESS_WIDTH - filled)}] "
                         f"{count}/{total}\x1b[K")
        sys.stderr.flush()


# A progress bar redraws at most this often (a terminal cannot show more) and
# is this many characters wide.
PROGRESS_REDRAW_S = 0.1
PROGRESS_WIDTH = 30
# Items counted between two reads of the clock: a read per item would cost
# more than the item at a million nodes.
PROGRESS_CHECK_EVERY = 1024

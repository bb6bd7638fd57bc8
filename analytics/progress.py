"""Progress of long work (ingest, demo build): numbered stages with their elapsed time, for the CLI and the web."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Progress:
    """Step progress on stderr (`[2/5] reading Venus ... 1.2 s`); silent when quiet."""

    def __init__(self, total: int, quiet: bool = False):
        self.total = total
        self.step = 0
        self.quiet = quiet
        self.t0 = time.perf_counter()

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """Report one stage: its label when it starts and its elapsed time when it ends."""
        self.step += 1
        t = time.perf_counter()
        if not self.quiet:
            print(f"[{self.step}/{self.total}] {label} ...", end="", file=sys.stderr, flush=True)
        yield
        if not self.quiet:
            print(f" {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)

    def done(self, label: str) -> None:
        """Report the end of the whole command with its total time."""
        if not self.quiet:
            print(f"{label} in {time.perf_counter() - self.t0:.1f} s", file=sys.stderr, flush=True)

"""Login defences: failures counted per client and per account with exponential back-off (in each worker process),
and a cap on the password hashes computed at once."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

FREE_FAILURES = 5  # failed logins allowed before the back-off starts
FAILURE_WINDOW_S = 900.0  # a quiet quarter of an hour forgets the failures
MAX_BACKOFF_S = 900.0
MAX_CONCURRENT_HASHES = 2  # scrypt checks at once per process; the rest wait briefly, then get 503
HASH_WAIT_S = 5.0


@dataclass
class _Record:
    failures: int = 0
    last_s: float = 0.0


@dataclass
class Throttle:
    """Failed attempts per key (a client address or an account name) and the back-off they earn."""

    records: dict[str, _Record] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_s(self, key: str, now_s: float | None = None) -> float:
        """Seconds key must wait before its next attempt (0 when it may try now)."""
        now_s = time.monotonic() if now_s is None else now_s
        with self.lock:
            record = self.records.get(key)
            if record is None or now_s - record.last_s > FAILURE_WINDOW_S or record.failures < FREE_FAILURES:
                return 0.0
            backoff_s = min(2.0 ** (record.failures - FREE_FAILURES), MAX_BACKOFF_S)
            return max(0.0, record.last_s + backoff_s - now_s)

    def failed(self, key: str, now_s: float | None = None) -> None:
        """Count one failed attempt of key."""
        now_s = time.monotonic() if now_s is None else now_s
        with self.lock:
            record = self.records.setdefault(key, _Record())
            if now_s - record.last_s > FAILURE_WINDOW_S:
                record.failures = 0
            record.failures += 1
            record.last_s = now_s
            if len(self.records) > 100_000:
                self.records.clear()

    def succeeded(self, key: str) -> None:
        """Forget key's failures."""
        with self.lock:
            self.records.pop(key, None)


HASH_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_HASHES)


class HashBusy(Exception):
    """Too many password checks are running: the caller answers 503 instead of queueing more CPU work."""


def hash_slot():
    """A context that holds one password-hash slot, raising HashBusy when none frees up within HASH_WAIT_S."""
    return _Slot()


class _Slot:
    def __enter__(self) -> None:
        if not HASH_SLOTS.acquire(timeout=HASH_WAIT_S):
            raise HashBusy("too many logins at once; try again in a moment")

    def __exit__(self, *_exc: object) -> None:
        HASH_SLOTS.release()

"""Login defences: failures counted per client and per account with exponential back-off (in the shared cache, so
all workers agree), and a cap on the password hashes computed at once (per worker process)."""

from __future__ import annotations

import threading
import time

from components.server.cache import recall, remember

FREE_FAILURES = 5  # failed logins allowed before the back-off starts
FAILURE_WINDOW_S = 900.0  # a quiet quarter of an hour forgets the failures
MAX_BACKOFF_S = 900.0
MAX_CONCURRENT_HASHES = 2  # scrypt checks at once per process; the rest wait briefly, then get 503
HASH_WAIT_S = 5.0


class Throttle:
    """Failed attempts per key (a client address or an account name) and the back-off they earn, kept in the shared
    cache so that every worker (and every host sharing a Redis) counts the same failures."""

    PREFIX = "helios:login-failures:"

    def _load(self, key: str) -> tuple[int, float]:
        record = recall(self.PREFIX + key)
        return (int(record[0]), float(record[1])) if isinstance(record, list | tuple) and len(record) == 2 else (0, 0.0)

    def wait_s(self, key: str, now_s: float | None = None) -> float:
        """Seconds key must wait before its next attempt (0 when it may try now)."""
        now_s = time.time() if now_s is None else now_s
        failures, last_s = self._load(key)
        if now_s - last_s > FAILURE_WINDOW_S or failures < FREE_FAILURES:
            return 0.0
        backoff_s = min(2.0 ** (failures - FREE_FAILURES), MAX_BACKOFF_S)
        return max(0.0, last_s + backoff_s - now_s)

    def failed(self, key: str, now_s: float | None = None) -> None:
        """Count one failed attempt of key."""
        now_s = time.time() if now_s is None else now_s
        failures, last_s = self._load(key)
        failures = 1 if now_s - last_s > FAILURE_WINDOW_S else failures + 1
        remember(self.PREFIX + key, [failures, now_s], int(FAILURE_WINDOW_S + MAX_BACKOFF_S))

    def succeeded(self, key: str) -> None:
        """Forget key's failures."""
        remember(self.PREFIX + key, [0, 0.0], 1)


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

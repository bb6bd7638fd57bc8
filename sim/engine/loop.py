"""The event loop of the simulator's VC runs: time walks over the arrival seconds
merged with the model's own next event (completions, key changes, midnights), one call per second reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

NEVER = 1 << 62  # the second of an event that never comes
_NO_ARRIVALS = range(0)


def drive(arrival_s: Sequence[int], on_time: Callable[[int, range], int]) -> None:
    """Call on_time(now_s, arrivals) -> the model's next own event second (NEVER if none) at each second that is an
    arrival's (arrivals: the positions in arrival_s of those at now_s, empty if none) or the model's next own event,
    in time order, until neither is left (the model has no own event before its first arrival)."""
    n, i, own_s = len(arrival_s), 0, NEVER
    next_s = arrival_s[0] if n else NEVER  # the next arrival's second
    while True:
        if own_s < next_s:
            own_s = on_time(own_s, _NO_ARRIVALS)  # NOTE: the cheapest path, for the many seconds with no arrival
            continue
        if next_s >= NEVER:
            return
        first, now_s = i, next_s
        while i < n and arrival_s[i] == now_s:
            i += 1
        next_s = arrival_s[i] if i < n else NEVER
        own_s = on_time(now_s, range(first, i))

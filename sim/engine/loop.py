"""The event loop shared by the simulator's VC runs and the synthetic queue: time walks over the arrival seconds
merged with the model's own next event (completions, key changes, midnights), one call per second reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

NEVER = 1 << 62  # the second of an event that never comes


def drive(arrival_s: Sequence[int], next_event_s: Callable[[], int], on_time: Callable[[int, range], None]) -> None:
    """Call on_time(now_s, arrivals) at each second that is an arrival's (arrivals: positions of the consecutive
    arrivals at now_s, empty if none) or the model's next own event, in time order, until neither is left (NEVER)."""
    n, i = len(arrival_s), 0
    while True:
        now_s = arrival_s[i] if i < n else NEVER
        own_s = next_event_s()
        if own_s < now_s:
            now_s = own_s
        if now_s >= NEVER:
            return
        first = i
        while i < n and arrival_s[i] == now_s:
            i += 1
        on_time(now_s, range(first, i))

"""EASY backfilling of the simulator's non-preemptive VC runs.

The blocked head of the queue gets a reservation: the site (a VC; 0 in a one-VC run) and second (its shadow time)
where it would start as the running jobs end, and the GPUs spare there then. Later jobs (the candidates) start now,
in queue order, if they can without delaying it: a candidate that ends by the shadow time or needs no more than the
spare GPUs may start anywhere (the spare shrinks when a late one starts on the reserved site); any other must avoid
the reserved site, and is not placed at all when no other site is left to it (a one-VC run: a random placer then
draws no random numbers for it).

With several sites the placer must choose by an order of preference over the sites that it may use, so that leaving
out a site it would not choose changes nothing: a lazy reservation is made only once a candidate has been placed (the
reservation costs more than most placements), and that candidate is placed again, without the reserved site, only if
it landed there and may not stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from sim.engine.loop import NEVER

NO_SITE = -1  # a site index meaning none: no reservation, or not placed
Scope = Sequence[int] | None  # the sites a candidate may be tried in (None = all of its own; empty = none)


class Reservation(NamedTuple):
    """Where and when the blocked head starts at the latest (its shadow second) and the GPUs spare there then."""

    site: int
    shadow_s: int
    spare_gpus: int


def reservation(
    site: int,
    used_gpus: int,
    head_gpus: int,
    head_duration_s: int,
    running: Iterable[tuple[int, int]],
    gpus: Sequence[int],
    capacity_over: Callable[[int, int], int],
) -> Reservation:
    """The head's reservation on one site: after each completion of the running (end second, job) in that order,
    spare = capacity_over(end, end + head duration) - GPUs still in use - head GPUs; the first end where spare >= 0
    is the shadow."""
    for end_s, j in running:
        used_gpus -= gpus[j]
        spare = capacity_over(end_s, end_s + head_duration_s) - used_gpus - head_gpus
        if spare >= 0:
            return Reservation(site, end_s, spare)
    return Reservation(site, NEVER, 0)


def backfill(
    now_s: int,
    candidates: Iterable[tuple[int, Scope]],
    gpus: Sequence[int],
    duration_s: Sequence[int],
    reserve: Callable[[], Reservation],
    place: Callable[[int, int, Scope], int],
    start: Callable[[int, int, int], None],
    without: Callable[[int, Scope, int], Scope],
    lazy: bool = False,
) -> list[int]:
    """Start, in order, the candidates (job, scope) that EASY backfilling lets start at now_s and return them:
    place(job, now_s, scope) -> site or NO_SITE, start(job, now_s, site), without(job, scope, site) -> the scope less
    that site, and reserve() called before anything starts (if lazy, only once a candidate has been placed)."""
    started: list[int] = []
    held: Reservation | None = None
    for j, scope in candidates:
        site = NO_SITE  # not placed yet
        if held is None:
            if lazy and (site := place(j, now_s, scope)) < 0:
                continue
            held = reserve()
            site_held, shadow_s, spare = held
        late = now_s + duration_s[j] > shadow_s
        if late and gpus[j] > spare and (site < 0 or site == site_held):  # it may not stay where it was placed
            scope = without(j, scope, site_held)
            if not scope:
                continue
            site = place(j, now_s, scope)
        elif site < 0:
            site = place(j, now_s, scope)
        if site < 0:
            continue
        if late and site == site_held:
            spare -= gpus[j]
        start(j, now_s, site)
        started.append(j)
    return started

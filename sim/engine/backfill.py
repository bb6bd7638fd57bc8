"""EASY backfilling, shared by the simulator's non-preemptive VC runs and the synthetic queue.

The blocked head of the queue gets a reservation: the site (a VC; 0 in a one-VC run) and second (its shadow time)
where it would start as the running jobs end, and the GPUs spare there then. Later jobs (the candidates) start now,
in queue order, if they can without delaying it: a candidate that ends by the shadow time or needs no more than the
spare GPUs may start anywhere (the spare shrinks when a late one starts on the reserved site); any other must avoid
the reserved site.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sim.engine.loop import NEVER

NO_SITE = -1  # a site index meaning none: nothing to avoid, or nowhere started
Scope = Sequence[int] | None  # the sites a candidate may be tried in (None = all of its own)


@dataclass(slots=True)
class Reservation:
    """Where and when the blocked head starts at the latest (its shadow second) and the GPUs spare there then."""

    site: int
    shadow_s: int
    spare_gpus: int


def reservation(
    site: int,
    used_gpus: int,
    head_gpus: int,
    running: Iterable[tuple[int, int]],
    gpus: Sequence[int],
    capacity_at: Callable[[int], int],
) -> Reservation:
    """The head's reservation on one site: after each completion of running (end second, job) in (end, job) order,
    spare = capacity_at(end) - GPUs still in use - head GPUs; the first end where spare >= 0 is the shadow."""
    for end_s, j in running:
        used_gpus -= gpus[j]
        spare = capacity_at(end_s) - used_gpus - head_gpus
        if spare >= 0:
            return Reservation(site, end_s, spare)
    return Reservation(site, NEVER, 0)


def backfill(
    now_s: int,
    candidates: Iterable[tuple[int, Scope]],
    duration_s: Sequence[int],
    gpus: Sequence[int],
    reserve: Callable[[], Reservation],
    try_start: Callable[[int, Scope, int], int],
    could_start: Callable[[int, Scope], bool] | None = None,
) -> None:
    """Start the candidates (job, scope) that EASY backfilling allows at now_s, in order, by
    try_start(job, scope, site to avoid or NO_SITE) -> site started on or NO_SITE; the reservation comes from
    reserve(), called once before anything starts (when could_start is given, only once a candidate could start)."""
    held: Reservation | None = None
    for j, scope in candidates:
        if held is None:
            if could_start is not None and not could_start(j, scope):
                continue
            held = reserve()
        late = now_s + duration_s[j] > held.shadow_s
        site = try_start(j, scope, held.site if late and gpus[j] > held.spare_gpus else NO_SITE)
        if late and site == held.site != NO_SITE:
            held.spare_gpus -= gpus[j]

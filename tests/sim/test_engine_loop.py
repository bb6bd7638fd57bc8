"""sim.engine.loop.drive: arrival seconds merged with the model's own events, one call per second reached."""

from __future__ import annotations

import heapq

from sim.engine.loop import NEVER, drive


class Recorder:
    """A model whose own events are a heap of seconds; each call may schedule further events."""

    def __init__(self, own_s, later_s=None):
        self.own_s = list(own_s)
        heapq.heapify(self.own_s)
        self.later_s = later_s or {}  # second -> seconds of the events scheduled by the call at that second
        self.calls = []

    def on_time(self, now_s, arrivals):
        while self.own_s and self.own_s[0] == now_s:
            heapq.heappop(self.own_s)
        for t in self.later_s.get(now_s, ()):
            heapq.heappush(self.own_s, t)
        self.calls.append((now_s, arrivals))
        return self.own_s[0] if self.own_s else NEVER


def test_arrivals_and_own_events_merge_in_time_order_with_one_call_per_second():
    # the model's own events (seconds 3, 5 and 12) become known at its first call
    model = Recorder([3, 5, 12])
    drive([0, 0, 5, 5, 9], model.on_time)
    assert model.calls == [(0, range(0, 2)), (3, range(2, 2)), (5, range(2, 4)), (9, range(4, 5)), (12, range(5, 5))]


def test_events_scheduled_by_a_call_are_reached_and_the_loop_ends_when_none_is_left():
    model = Recorder([], later_s={1: [4], 4: [6, 6]})
    drive([1], model.on_time)
    assert model.calls == [(1, range(0, 1)), (4, range(1, 1)), (6, range(1, 1))]


def test_nothing_to_do_makes_no_call():
    model = Recorder([])
    drive([], model.on_time)
    assert model.calls == []

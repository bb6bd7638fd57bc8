"""The compiler the Slurm model's passes run under: numba's njit, cached on disk beside the code, so that a replay
of a month of a large cluster takes seconds (its passes are loops over jobs and nodes, a hundred times slower in
the interpreter). `make install` compiles them once (sim.slurm.warm, about 80 s on 2 cores); later replays load
them in a second or two. Where the code's folder is read-only, numba keeps the cache in ~/.cache/numba instead."""

from __future__ import annotations

import numba

NEVER = 1 << 62  # the second of an event that never comes
NONE = -(1 << 62)  # no second: a start never found, a clock not yet started


def compiled(fn):
    """fn compiled to machine code by numba (nopython, cached on disk, division by zero as NumPy does it)."""
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)

"""The compiled Slurm model replays 30 random cases exactly as the Python model it replaced recorded them."""

import json
from pathlib import Path

import numpy as np
import pytest

from sim.slurm.run import replay
from tests.sim.slurm.golden_cases import case

GOLDENS = json.loads((Path(__file__).parent / "data" / "slurm_goldens.json").read_text())


@pytest.mark.parametrize("seed", sorted(GOLDENS, key=int))
def test_replay_matches_the_recorded_one(seed):
    config, jobs, boot_s = case(int(seed))
    out = replay(config, jobs, boot_s)
    want = GOLDENS[seed]
    assert out.start_s.tolist() == want["start_s"]
    assert out.end_s.tolist() == want["end_s"]
    assert np.asarray(out.timed_out).tolist() == want["timed_out"]

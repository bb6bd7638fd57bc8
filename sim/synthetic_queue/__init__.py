"""Start times of the synthetic demo trace: the one Slurm model (sim.slurm) on daily VC capacities, closed loop."""

"""Start times of the synthetic demo trace: a Slurm-like queue on daily VC capacities, with calibrated user quotas."""

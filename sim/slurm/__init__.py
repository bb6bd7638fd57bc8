"""A model of Slurm's own scheduler (the `slurm` policy): the cluster's nodes and partitions, priority/multifactor
with fair-share, association and QOS limits, and the main and backfill scheduling passes, replayed event by event.

Modules (the settings themselves are analytics.slurm_config): `fairshare` (usage, decay, Fair Tree and classic
factors), `priority` (the multifactor sum), `limits` (GrpTRES, MaxJobs, MaxTRESPerUser), `nodes` (the node pool,
partitions as views over it, placement), `plan` (backfill's node-space plan on time limits), `run` (the event
loop and its passes), `tables` (settings and jobs as the arrays the compiled passes read), `jit` (numba; `warm`
compiles it at install) and `calibrate` (a configuration for a trace that recorded none). docs/twin.md says what
is modelled and what is left out.
"""

"""The what-if engine: event-driven scheduling (QSSF and friends), scenarios, sweeps, CES, the demo's queue."""

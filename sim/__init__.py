"""Pure simulator core: event-driven scheduling (QSSF and friends) and cluster energy saving (CES)."""

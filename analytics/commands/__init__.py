"""Sub-commands of the `helios` command line."""

"""Cluster Energy Saving (CES): busy-node demand, forecasters, power policy and energy accounting."""

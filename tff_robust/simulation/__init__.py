"""Simulation support: execution context, tasks, training loop."""

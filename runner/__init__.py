"""Sweep runner: turns sweep files into runs and run directories into tables and figures."""

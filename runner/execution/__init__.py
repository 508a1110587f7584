"""Executing runs: one training, the executors, resume, the archive, probes, the inputs' freshness."""

"""Every input checked before any work: the checks, the GPU-hour estimate, the task setup they share."""

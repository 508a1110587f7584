"""Downstream tasks of the ELMo paper (Sec. 4): one sub-package per task."""
from tasks.knobs import apply_defaults

apply_defaults()

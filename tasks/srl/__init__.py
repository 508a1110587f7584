"""Semantic role labelling (paper Sec. 4, Table 1): He et al. (2017)'s model on OntoNotes 5.0 CoNLL-2012."""
from tasks.srl import reader  # noqa: F401

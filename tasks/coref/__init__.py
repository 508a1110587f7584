"""Coreference resolution (paper Sec. 4, Table 1): Lee et al. (2017)'s span model on OntoNotes 5.0 CoNLL-2012."""
from tasks.coref import model, reader, schedule  # noqa: F401

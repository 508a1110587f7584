"""SNLI (paper Sec. 4): ESIM with a checked SNLI reader."""
import allennlp_models.pair_classification  # noqa: F401  (registers esim)

from tasks.snli.esim_sized import SizedESIM  # noqa: F401  (registers esim_sized)
from tasks.snli.snli_reader import CheckedSnliReader  # noqa: F401  (registers snli_checked)

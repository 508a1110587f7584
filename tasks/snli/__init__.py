"""SNLI (paper Sec. 4): ESIM with a checked SNLI reader."""
from tasks.snli.esim_sized import SizedESIM
from tasks.snli.snli_reader import CheckedSnliReader

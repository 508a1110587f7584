"""SST-5 (paper Sec. 4): BCN with a checked treebank reader."""
from tasks.sst.bcn_sized import SizedBCN  # noqa: F401  (registers bcn_sized)
from tasks.sst.sst_reader import CheckedSstReader  # noqa: F401  (registers sst_checked)

"""SST-5 (paper Sec. 4): BCN with a checked treebank reader."""
from tasks.sst.bcn_sized import SizedBCN
from tasks.sst.sst_reader import CheckedSstReader

"""SQuAD 1.1 (paper Sec. 4): our BiDAF + self-attention (Clark & Gardner 2018), checked reader, official v1.1 EM/F1."""
from tasks.squad.bidaf_self_attention import BidafSelfAttention
from tasks.squad.glove_fallback import GloveCasedFallbackEmbedding
from tasks.squad.squad_reader import CheckedSquad1Reader
from tasks.squad.squad_v11_eval import SquadV11EmF1
from tasks.squad.moving_average import ResumableExponentialMovingAverage

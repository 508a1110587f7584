"""SQuAD 1.1 (paper Sec. 4): our BiDAF + self-attention (Clark & Gardner 2018), checked reader, official v1.1 EM/F1."""
# Imported for their registrations: bidaf_self_attention, glove_cased_fallback, exponential_resumable,
# squad1_checked, squad_v11.
from tasks.squad.bidaf_self_attention import BidafSelfAttention  # noqa: F401  (registers it)
from tasks.squad.glove_fallback import GloveCasedFallbackEmbedding  # noqa: F401  (registers it)
from tasks.squad.moving_average import ResumableExponentialMovingAverage  # noqa: F401  (registers it)
from tasks.squad.squad_reader import CheckedSquad1Reader  # noqa: F401  (registers it)
from tasks.squad.squad_v11_eval import SquadV11EmF1  # noqa: F401  (registers it)

"""ELMo (Peters et al. 2018) in plain PyTorch: the biLM, its scalar mixes, official weight files.

AllenNLP registration lives apart, in ``elmo_module.allennlp_adapter``.
"""
from elmo_module.bilm import BiLmOutput, ElmoBiLm
from elmo_module.characters import batch_to_ids, token_to_ids
from elmo_module.elmo import Elmo
from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.scalar_mix import ScalarMix
from elmo_module.weights import load_bilm, save_bilm

__all__ = ["BiLmOptions", "BiLmOutput", "Elmo", "ElmoBiLm", "ElmoInputError", "ScalarMix", "batch_to_ids",
           "load_bilm", "save_bilm", "token_to_ids"]

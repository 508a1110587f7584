"""Pretraining the biLM on raw text, and fine-tuning it on a task's text: the language model of arXiv:1802.05365v2
Sec. 3.1 (pp. 2–3) trained as Sec. 3.4 (p. 4) and supplement A.1 (p. 12) say, following bilm-tf's recipe
(bin/train_elmo.py, bilm/training.py, bilm/data.py).

- ``cli``: the ``python -m elmo_module pretrain`` and ``finetune`` commands;
- ``trainer``: the trainer, held-out perplexity, checkpoints and what ``--resume`` checks;
- ``language_model``: the softmax shared by both directions, the full and sampled softmax loss, the head's files;
- ``corpus``: tokenizing, the vocabulary, and the text as parallel streams cut into windows.

The inference biLM these train (``elmo_module.bilm``) knows nothing of them.
"""

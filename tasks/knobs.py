"""The named knobs shared by every task config, with their defaults.

A task config reads each knob with ``std.extVar("NAME")``. AllenNLP hands every environment variable to jsonnet as
an external variable, and imports this package (through ``.allennlp_plugins`` or ``--include-package tasks``) before
it evaluates a config, so setting the defaults here lets ``allennlp train jsonnet_configs/ner.jsonnet`` run with no
variable set, while ``ELMO=input allennlp train ...`` changes one knob. This is the one place the defaults live.
"""
import os

# Paper defaults (Peters et al. 2018, Sec. 5 and Table 2): ELMo at the input, weighted mix, lambda = 0.001.
KNOBS = {
    # ELMo placement: none (the baseline) | input | output | both   (Table 3)
    "ELMO": "none",
    # layer mix: weighted (softmax weights + gamma, lambda penalty) | last_only (top layer, trainable gamma) | average
    "ELMO_MIX": "weighted",
    # lambda of the lambda * sum(w^2) penalty on the mix weights (Sec. 3.2, Table 2)
    "ELMO_LAMBDA": "0.001",
    # layer norm of each biLM layer before the mix (paper Sec. 3.2; bilm-tf's weight_layers do_layer_norm): false |
    # true. allennlp-models' ELMo configs and document-qa use false; the paper's SNLI model used true
    "ELMO_LAYER_NORM": "false",
    # biLM files (options.json + hdf5 in the official layout); empty = the small bundled biLM
    "ELMO_OPTIONS": "",
    "ELMO_WEIGHTS": "",
    # directory of cached biLM activations (runner issue); empty = run the biLM
    "ELMO_CACHE": "",
    "SEED": "13370",
    # seeded random subsample of the training set (Figure 1 goes down to 0.001)
    "TRAIN_FRACTION": "1.0",
    # data; empty = the task's small bundled sample in the real format
    "TRAIN_PATH": "",
    "DEV_PATH": "",
    "TEST_PATH": "",
    # optional GloVe text file; empty = word embeddings trained from scratch
    "GLOVE_PATH": "",
    # SST-5 only: true = train on every labelled phrase of the training trees (allennlp-models' BCN configs),
    # false = on whole sentences (about 18x fewer instances; the mini profile's CPU budget). Dev/test: sentences.
    "SST_PHRASES": "true",
    # model size: paper | small | tiny (tiny/small for CPU runs, see each task README)
    "SIZE": "paper",
    # empty = the task's paper default
    "NUM_EPOCHS": "",
    "CUDA_DEVICE": "-1",
    # true: log the run to Weights & Biases (allennlp's wandb callback; WANDB_MODE=offline works without network)
    "WANDB": "false",
}


def apply_defaults(environ=os.environ):
    """Set every knob that the environment does not already set."""
    for name, value in KNOBS.items():
        environ.setdefault(name, value)

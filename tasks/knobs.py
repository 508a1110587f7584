"""The named knobs shared by every task config, with their defaults.

A task config reads each knob with ``std.extVar("NAME")``. AllenNLP hands every environment variable to jsonnet as
an external variable, and imports this package (through ``.allennlp_plugins`` or ``--include-package tasks``) before
it evaluates a config, so setting the defaults here lets ``allennlp train jsonnet_configs/ner.jsonnet`` run with no
variable set, while ``ELMO=input allennlp train ...`` changes one knob. This is the one place the defaults live.
"""
import math
import os
import sys

# Paper defaults (Peters et al. 2018, Sec. 5 and Table 2): ELMo at the input, weighted mix, lambda = 0.001.
KNOBS = {
    # ELMo placement: none (the baseline) | input | output | both   (Table 3)
    "ELMO": "none",
    # layer mix: weighted (softmax weights + gamma, lambda penalty) | last_only (top layer, trainable gamma) | average
    # | token_only (the biLM's token layer only, trainable gamma: the supplement's ELMo_0 ablation)
    "ELMO_MIX": "weighted",
    # lambda of the lambda * sum(w^2) penalty on the mix weights (Sec. 3.2, Table 2)
    "ELMO_LAMBDA": "0.001",
    # layer norm of each biLM layer before the mix (paper Sec. 3.2; bilm-tf's weight_layers do_layer_norm): false |
    # true. allennlp-models' ELMo configs and document-qa use false; the paper's SNLI model used true
    "ELMO_LAYER_NORM": "false",
    # the contextual encoder: elmo (the biLM of ELMO_OPTIONS / ELMO_WEIGHTS) | a Hugging Face transformer used the
    # ELMo way (frozen, every hidden state mixed: elmo_module/transformer.py), by its save_pretrained directory or
    # hf:NAME. ELMO sets where it goes, ELMO_MIX / ELMO_LAMBDA / ELMO_LAYER_NORM / ELMO_PRECISION how it is mixed
    "ENCODER": "elmo",
    # a transformer encoder's word pieces to the task's words: first (the first piece's vector) | mean
    "ENCODER_POOLING": "first",
    # biLM files (options.json + hdf5 in the official layout); empty = the small bundled biLM
    "ELMO_OPTIONS": "",
    "ELMO_WEIGHTS": "",
    # directory of cached biLM activations (elmo_module/activation_cache.py); empty = run the biLM
    "ELMO_CACHE": "",
    # the biLM's matrix products: float32 | bfloat16 (elmo_module/precision.py; the activation cache records it)
    "ELMO_PRECISION": "float32",
    # the task model's training and dev passes: float32 | bfloat16 (autocast, float32 master weights, float32
    # normalisations and loss: tasks/task_precision.py)
    "TASK_PRECISION": "float32",
    "SEED": "13370",
    # seeded random subsample of the training set (Figure 1 goes down to 0.001)
    "TRAIN_FRACTION": "1.0",
    # data; empty = the task's small bundled sample in the real format
    "TRAIN_PATH": "",
    "DEV_PATH": "",
    "TEST_PATH": "",
    # optional GloVe text file; empty = word embeddings trained from scratch
    "GLOVE_PATH": "",
    # false: no word embedding at all (a zero-width one), the token representation is ELMo alone: the supplement's
    # "ELMo without GloVe" ablation (needs ELMO=input or both)
    "WORD_VECTORS": "true",
    # SST-5 only: true = train on every labelled phrase of the training trees (allennlp-models' BCN configs),
    # false = on whole sentences (about 18x fewer instances; the mini profile's CPU budget). Dev/test: sentences.
    "SST_PHRASES": "true",
    # model size: paper | small | tiny (tiny/small for CPU runs, see each task README)
    "SIZE": "paper",
    # empty = the task's paper default
    "NUM_EPOCHS": "",
    # empty = an epoch is one pass over the training data; N = an epoch is N batches (allennlp's data_loader
    # batches_per_epoch: the loader cycles through the data, reshuffled at each pass). Figure 1's smallest training
    # sets use it so that the learning-rate schedule and early stopping, which act per epoch, see as many updates
    # as at the next point (runner/profiles/small.json)
    "BATCHES_PER_EPOCH": "",
    "CUDA_DEVICE": "-1",
    # true: log the run to Weights & Biases (allennlp's wandb callback; WANDB_MODE=offline works without network)
    "WANDB": "false",
}


def apply_defaults(environ=os.environ):
    """Set every knob that the environment does not already set."""
    for name, value in KNOBS.items():
        environ.setdefault(name, value)


def _number(low, high=None, low_open=True, integer=False, what=None):
    """A rule: the value parses as a finite number (an integer if ``integer``) above ``low`` (or at it, if not
    ``low_open``) and at most ``high``; returns what was expected when it does not."""
    bounds = (f" in {'(' if low_open else '['}{low}, {high}]" if high is not None
              else f" {'>' if low_open else '>='} {low}")
    expected = what or ("an integer" if integer else "a number") + bounds

    def check(value):
        try:
            number = int(value) if integer else float(value)
        except ValueError:
            return expected
        in_range = math.isfinite(number) and (number > low if low_open else number >= low) and \
            (high is None or number <= high)
        return None if in_range else expected
    return check


def _one_of(*allowed):
    def check(value):
        return None if value in allowed else " | ".join(allowed)
    check.allowed = allowed  # read by docs/knobs.md's test (tests/test_docs.py)
    return check


def _empty_or(rule):
    return lambda value: None if value == "" else (rule(value) and f"empty or {rule(value)}")


# What each knob accepts (the configs would otherwise train silently on a wrong value: TRAIN_FRACTION=1.5 trains on
# all the data and is reported as 1.5; NUM_EPOCHS=0 trains nothing). Knobs not listed (paths) take any string.
RULES = {
    "ELMO": _one_of("none", "input", "output", "both"),
    "ELMO_MIX": _one_of("weighted", "last_only", "average", "token_only"),
    "WORD_VECTORS": _one_of("true", "false"),
    # the paper's values are 1 and 0.001 (Sec. 3.2, Table 2); past 1,000 the penalty only pins the weights harder
    # to their average, and 1e30 ended the training in an OverflowError
    "ELMO_LAMBDA": _number(0, 1000, low_open=False),
    "ELMO_LAYER_NORM": _one_of("false", "true"),
    "ELMO_PRECISION": _one_of("float32", "bfloat16"),
    "TASK_PRECISION": _one_of("float32", "bfloat16"),
    "ENCODER_POOLING": _one_of("first", "mean"),
    "SEED": _number(0, low_open=False, integer=True),
    "TRAIN_FRACTION": _number(0, 1),
    "SST_PHRASES": _one_of("true", "false"),
    "SIZE": _one_of("paper", "small", "tiny"),
    "NUM_EPOCHS": _empty_or(_number(0, integer=True, what="a positive integer")),
    "BATCHES_PER_EPOCH": _empty_or(_number(0, integer=True, what="a positive integer")),
    "CUDA_DEVICE": _number(-1, low_open=False, integer=True),
    "WANDB": _one_of("false", "true"),
}


def knob_problems(knobs) -> list:
    """One line per knob in ``knobs`` (a dict, e.g. os.environ) whose value its rule rejects:
    ``TRAIN_FRACTION = '1.5': expected a number in (0, 1]``."""
    problems = []
    for name, rule in RULES.items():
        if name in knobs:
            expected = rule(str(knobs[name]))
            if expected:
                problems.append(f"knob {name} = {str(knobs[name])!r}: expected {expected}")
    # the token representation would be empty: no word embedding and no ELMo at the input
    if str(knobs.get("WORD_VECTORS", KNOBS["WORD_VECTORS"])) == "false" and \
            str(knobs.get("ELMO", KNOBS["ELMO"])) not in ("input", "both"):
        problems.append(f"knob WORD_VECTORS = 'false': expected ELMO=input or both beside it, found "
                        f"ELMO={str(knobs.get('ELMO', KNOBS['ELMO']))!r}")
    return problems


def _running_allennlp() -> bool:
    """``allennlp ...`` or ``python -m allennlp ...``: the process that reads the knobs from its environment (the
    runner and the tests import this package too, but hand knobs to their runs explicitly)."""
    program = os.path.normpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return os.path.basename(program) == "allennlp" or program.endswith(os.path.join("allennlp", "__main__.py"))


def check_environment(environ=os.environ) -> None:
    """Called when allennlp loads tasks.allennlp_plugin: under ``allennlp``, a bad knob stops it with one line on stderr
    (before any data is read), not a traceback or a training on a wrong value."""
    problems = knob_problems(environ)
    if problems and _running_allennlp():
        print(f"error: {problems[0]} (environment variable; see tasks/knobs.py)", file=sys.stderr)
        raise SystemExit(2)

"""Pretraining speed with the LSTM's one-node recurrence (``elmo_module.lstm._Recurrence``) against the
step-by-step autograd graph it replaced (``lstm.USE_RECURRENCE = False``), float32 and mixed bfloat16, one process.

    OMP_NUM_THREADS=1 .venv/bin/python tools/lstm_backward_bench.py --size mini --steps 30 --max-tokens 0
    OMP_NUM_THREADS=1 .venv/bin/python tools/lstm_backward_bench.py --size full --steps 5 --max-tokens 0

One ``LmTrainer`` per precision, built as ``pretrain`` builds it (mini: runner/profiles/mini_bilm_options.json;
full: elmo_module.benchmark.FULL_SIZE), on the first ``--max-tokens`` of ``--train``. The default 100k tokens give an
11,928-word vocabulary; the softmax and its optimizer update (the same work in every variant and precision) grow with
the vocabulary, so ``--max-tokens 0`` (the whole file: 42,656 words of wikinews_01) gives the ratios of a real one.
Every window is trained by the four variants (old/new x float32/bfloat16) in turn, old and new in alternating
order, the second from the same weights, optimizer state, carried LSTM state and random streams as the first
(restored outside the timing; the second's result is kept), so the machine's load falls on all alike. Prints each
window's seconds, tokens/s of each variant and the ratios, and the largest loss difference of old and new.
"""
import argparse
import copy
import json
import time
from pathlib import Path

import torch

from elmo_module import lstm
from elmo_module.benchmark import FULL_SIZE
from elmo_module.options import BiLmOptions
from elmo_module.pretraining.corpus import TOKENIZERS, build_vocabulary, read_corpus
from elmo_module.pretraining.language_model import new_language_model
from elmo_module.pretraining.trainer import LmText, LmTrainer, TrainingSettings

VARIANTS = [(p, v) for p in ("float32", "bfloat16") for v in ("old", "new")]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=("mini", "full"), default="mini")
    p.add_argument("--steps", type=int, default=20, help="timed windows (after one warm-up window)")
    p.add_argument("--train", default="../shared/data/lm_corpus/wikinews_01.txt")
    p.add_argument("--max-tokens", type=int, default=100000, help="0: the whole file")
    p.add_argument("--vocab-size", type=int, default=50000)
    p.add_argument("--negatives", type=int, default=1024)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    options = (BiLmOptions.load("runner/profiles/mini_bilm_options.json") if args.size == "mini"
               else BiLmOptions.from_dict(FULL_SIZE))
    options.n_characters = 262
    corpus = read_corpus([Path(args.train)], TOKENIZERS["simple"], max_tokens=args.max_tokens or None)
    vocabulary = build_vocabulary(corpus, args.vocab_size, 1)
    text = LmText(corpus, vocabulary, options.max_chars)
    trainers = {}
    for precision in ("float32", "bfloat16"):
        model = new_language_model(options, len(vocabulary), 0.1, seed=0)
        trainers[precision] = LmTrainer(model, vocabulary, text, TrainingSettings(negatives=args.negatives,
                                                                                    precision=precision))
    windows = text.window_pairs(corpus.shuffled_ids(0, 0), 128, 20)
    seconds = {v: [] for v in VARIANTS}
    losses = {v: [] for v in VARIANTS}
    for step in range(args.steps + 1):
        _, *window = next(windows)
        for precision, trainer in trainers.items():
            saved = (copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict()),
                     trainer.state, trainer.sampler.get_state(), torch.get_rng_state())
            order = ("old", "new") if step % 2 else ("new", "old")
            for k, variant in enumerate(order):
                if k:  # the second variant starts where the first did
                    trainer.model.load_state_dict(saved[0])
                    trainer.optimizer.load_state_dict(saved[1])
                    trainer.state = saved[2]
                    trainer.sampler.set_state(saved[3])
                    torch.set_rng_state(saved[4])
                lstm.USE_RECURRENCE = variant == "new"
                started = time.perf_counter()
                loss = trainer.train_step(*window)
                if step:  # step 0 warms up
                    seconds[precision, variant].append(time.perf_counter() - started)
                    losses[precision, variant].append(loss)
        if step:
            print(json.dumps({"step": step, **{f"{p}/{v}": round(seconds[p, v][-1], 3) for p, v in VARIANTS}}),
                  flush=True)
    tokens = 128 * 20 * args.steps
    rate = {v: tokens / sum(s) for v, s in seconds.items()}
    print(f"{args.size}: vocabulary {len(vocabulary)}, {args.steps} windows of 128 x 20 tokens, tokens/s: "
          + ", ".join(f"{p} {v} {rate[p, v]:.1f}" for p, v in VARIANTS))

    def ratio(a, b):
        per_step = [y / x for x, y in zip(seconds[a], seconds[b])]
        return f"{rate[a] / rate[b]:.3f}x (per window {min(per_step):.3f}-{max(per_step):.3f})"
    print("new / old float32:", ratio(("float32", "new"), ("float32", "old")))
    print("new / old bfloat16:", ratio(("bfloat16", "new"), ("bfloat16", "old")))
    print("new bfloat16 / new float32:", ratio(("bfloat16", "new"), ("float32", "new")))
    print("new bfloat16 / old float32:", ratio(("bfloat16", "new"), ("float32", "old")))
    for precision in ("float32", "bfloat16"):
        diff = max(abs(a - b) for a, b in zip(losses[precision, "old"], losses[precision, "new"]))
        print(f"{precision}: max |loss old - loss new| {diff:.3g}")


if __name__ == "__main__":
    main()

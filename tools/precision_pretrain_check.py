"""Pretraining in float32 and in mixed bfloat16 side by side, in one process: held-out perplexity at the same number of
training tokens, and the training speed of each measured under the same load.

    OMP_NUM_THREADS=1 .venv/bin/python tools/precision_pretrain_check.py \
        --options runner/profiles/mini_bilm_options.json \
        --train ../shared/data/lm_corpus/*_0?.txt --heldout ../shared/data/lm_corpus/heldout/*.txt \
        --heldout-tokens 100000 --vocab-size 50000 --negatives 1024 --tokens 5000000 --eval-every 250 --out check.json

Both trainers are ``elmo_module.pretraining.trainer.LmTrainer`` as ``pretrain`` builds them (same initial weights, seed,
vocabulary and data order); they take turns step by step, each with its own torch random state (dropout), so each sees
exactly what it would see alone. Held-out perplexity is computed in float32 for both (it measures the weights).
``--out`` is rewritten after every evaluation, so a run stopped early keeps its figures so far. With ``--checkpoint
FILE`` both trainers are saved there at every evaluation too (model, optimizer, data position, random states, seconds so
far), and the same command run again goes on from it exactly where it stopped, to the same figures as a run without a
stop (a larger ``--tokens`` extends a finished check); the 5M-token check takes ~80 min of a core, longer than a loaded
machine's session leaves.
"""
import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.pretraining.corpus import TOKENIZERS, build_vocabulary, expand_paths, read_corpus
from elmo_module.pretraining.language_model import new_language_model
from elmo_module.pretraining.trainer import LmText, LmTrainer, TrainingSettings, heldout_perplexity

PRECISIONS = ("float32", "bfloat16")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--options", required=True)
    p.add_argument("--train", nargs="+", required=True)
    p.add_argument("--heldout", nargs="+", required=True)
    p.add_argument("--heldout-tokens", type=int, default=100000)
    p.add_argument("--vocab-size", type=int, default=50000)
    p.add_argument("--negatives", type=int, default=1024)
    p.add_argument("--tokens", type=int, required=True, help="training tokens of each precision")
    p.add_argument("--eval-every", type=int, default=250, help="steps between held-out evaluations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="JSON written after every evaluation")
    p.add_argument("--checkpoint", help="both trainers saved here at every evaluation; an existing one is resumed")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    options = BiLmOptions.load(args.options)
    options.n_characters = 262
    train = read_corpus(expand_paths(args.train, "--train"), TOKENIZERS["simple"])
    heldout = read_corpus(expand_paths(args.heldout, "--heldout"), TOKENIZERS["simple"], max_tokens=args.heldout_tokens)
    vocabulary = build_vocabulary(train, args.vocab_size, 1)
    text, heldout_text = LmText(train, vocabulary, options.max_chars), LmText(heldout, vocabulary, options.max_chars)
    trainers, rng, seconds = {}, {}, {}
    for precision in PRECISIONS:  # as run_pretrain builds its model
        model = new_language_model(options, len(vocabulary), 0.1, args.seed)
        settings = TrainingSettings(negatives=args.negatives, seed=args.seed, precision=precision,
                                    vocab_size=args.vocab_size)
        trainers[precision], rng[precision], seconds[precision] = LmTrainer(model, vocabulary, text, settings), \
            torch.get_rng_state(), 0.0
    report = {"command": "python tools/precision_pretrain_check.py " + " ".join(
        a if a.startswith("--") else json.dumps(a) for a in (argv or sys.argv[1:])),
        "vocabulary_size": len(vocabulary), "heldout_tokens": heldout.n_tokens, "threads": args.threads,
        "evaluations": []}
    # what a resumed check must find again (the trainers' own settings, corpus and options are checked by restore)
    identity = {"heldout": [str(f) for f in heldout.files], "heldout_tokens": heldout.n_tokens,
                "eval_every": args.eval_every, "seed": args.seed, "options": options.to_dict()}
    if args.checkpoint and Path(args.checkpoint).exists():
        saved = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
        if not isinstance(saved, dict) or saved.get("identity", {}).keys() != identity.keys():
            raise SystemExit(f"error: --checkpoint '{args.checkpoint}' is not a checkpoint of this tool")
        for key, value in identity.items():
            if saved["identity"][key] != value:
                raise SystemExit(f"error: --checkpoint '{args.checkpoint}' was made with "
                                 f"{key} {saved['identity'][key]!r}"
                                 f", this command gives {value!r}; use another --checkpoint or the same arguments")
        try:
            for precision, trainer in trainers.items():
                state = saved["trainers"][precision]
                trainer.restore(state, args.checkpoint)
                rng[precision], seconds[precision] = state["rng"]["torch"], saved["seconds"][precision]
        except ElmoInputError as e:
            raise SystemExit(f"error: {e}") from None
        report["evaluations"] = saved["evaluations"]
        print(f"resuming from '{args.checkpoint}' at step {trainers['float32'].step}", flush=True)

    def save():
        state = {"identity": identity, "seconds": dict(seconds), "evaluations": report["evaluations"], "trainers": {}}
        for precision, trainer in trainers.items():
            state["trainers"][precision] = trainer.checkpoint()
            state["trainers"][precision]["rng"]["torch"] = rng[precision]  # each trainer's own stream, not the global
        tmp = Path(args.checkpoint + ".partial")
        torch.save(state, tmp)
        os.replace(tmp, args.checkpoint)  # never a half-written checkpoint under the real name

    def evaluate():
        row = {"step": trainers["float32"].step, "tokens": trainers["float32"].tokens}
        for precision, trainer in trainers.items():
            ppl = heldout_perplexity(trainer.model, heldout_text, 128, 20)
            row[precision] = {"heldout": round(ppl["average"], 3), "train_seconds": round(seconds[precision], 1),
                              "tokens_per_second": round(trainer.tokens / max(seconds[precision], 1e-9), 1)}
        row["perplexity_ratio"] = round(row["bfloat16"]["heldout"] / row["float32"]["heldout"], 4)
        row["speed_ratio"] = round(seconds["float32"] / max(seconds["bfloat16"], 1e-9), 3)
        report["evaluations"].append(row)
        tmp = Path(args.out + ".partial")
        tmp.write_text(json.dumps(report, indent=1) + "\n")
        os.replace(tmp, args.out)
        if args.checkpoint:
            save()
        print(json.dumps(row), flush=True)

    def windows(trainer):
        """Epoch after epoch as LmTrainer.run: each epoch reshuffles the lines (seeded by epoch) and starts from zero
        state (a --tokens beyond one pass over --train used to end in StopIteration)."""
        while True:
            yield from trainer.train_text.window_pairs(train.shuffled_ids(args.seed, trainer.epoch), 128, 20,
                                                       trainer.window)  # from the resumed window, then from 0
            trainer.epoch, trainer.window, trainer.state = trainer.epoch + 1, 0, None

    if not report["evaluations"]:
        evaluate()
    streams = {p: windows(t) for p, t in trainers.items()}
    for step in range(trainers["float32"].step + 1, math.ceil(args.tokens / (128 * 20)) + 1):
        for precision in (PRECISIONS if step % 2 else PRECISIONS[::-1]):  # alternate who goes first
            trainer = trainers[precision]
            torch.set_rng_state(rng[precision])
            k, f_in, f_next, b_in, b_next = next(streams[precision])
            started = time.perf_counter()
            loss = trainer.train_step(f_in, f_next, b_in, b_next)
            seconds[precision] += time.perf_counter() - started
            trainer.window, trainer.step, trainer.tokens = k + 1, trainer.step + 1, trainer.tokens + f_next.numel()
            rng[precision] = torch.get_rng_state()
            if not math.isfinite(loss):
                raise SystemExit(f"error: {precision} loss became {loss} at step {step}")
        if step % args.eval_every == 0:
            evaluate()
    if report["evaluations"][-1]["step"] != trainers["float32"].step:
        evaluate()


if __name__ == "__main__":
    main()

"""``python -m elmo_module pretrain`` and ``python -m elmo_module finetune``: pretrain the ELMo biLM on raw text, and
fine-tune it on a task's text (arXiv:1802.05365v2 Sec. 3.4, p. 4, and supplement A.1, p. 12); see docs/elmo_core.md
("pretrain").

The model and its softmax are ``elmo_module.pretraining.language_model``; the trainer and its checkpoints
``elmo_module.pretraining.trainer``; the text, its vocabulary and windows ``elmo_module.pretraining.corpus``.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from elmo_module.device import resolve
from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.pause_points import pause_point
from elmo_module.precision import PRECISIONS, check_precision
from elmo_module.pretraining.corpus import TOKENIZERS, Corpus, build_vocabulary, expand_paths, read_corpus
from elmo_module.pretraining.language_model import (
    BiLanguageModel,
    load_language_model,
    new_language_model,
    write_language_model,
)
from elmo_module.pretraining.trainer import LmText, LmTrainer, TrainingSettings, heldout_perplexity, read_checkpoint
from elmo_module.progress import progress_bar
from elmo_module.weights import load_bilm


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class _Progress:
    """tqdm bar counting tokens (so its rate is tokens/s) with the running training perplexity (an exponential
    moving average of the loss; with the sampled softmax this is the sampled loss, as bilm-tf prints)."""

    def __init__(self, total: int, initial: int, description: str):
        self.bar = progress_bar(total=total, initial=initial, unit="tok", unit_scale=True, desc=description,
                                dynamic_ncols=True, mininterval=2.0)
        self.average_loss = None

    def __call__(self, trainer: LmTrainer, loss: float, tokens: int) -> None:
        self.average_loss = loss if self.average_loss is None else 0.98 * self.average_loss + 0.02 * loss
        self.bar.update(tokens)
        self.bar.set_postfix(ppl=f"{math.exp(min(self.average_loss, 50)):.1f}", epoch=trainer.epoch,
                             refresh=False)

    def close(self):
        self.bar.close()


# -------------------------------------------------------------------------------------------------- commands

def _add_training_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainingSettings()
    parser.add_argument("--train", nargs="+", required=True, metavar="FILE_OR_GLOB",
                        help="UTF-8 text, one sentence or paragraph per line")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--tokenize", choices=sorted(TOKENIZERS), default="simple",
                        help="simple: split punctuation like PTB/CoNLL (default); whitespace: pre-tokenized text")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="skip lines that are not valid UTF-8 (and report how many) instead of stopping")
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="parallel streams (default 128)")
    parser.add_argument("--unroll", type=int, default=d.unroll, help="tokens per window (default 20)")
    parser.add_argument("--lr", type=float, default=d.lr, help="Adagrad learning rate (default 0.2)")
    parser.add_argument("--clip", type=float, default=d.clip, help="global gradient-norm clip (default 10)")
    parser.add_argument("--dropout", type=float, default=d.dropout, help="default 0.1")
    parser.add_argument("--negatives", type=int, default=d.negatives,
                        help="sampled-softmax negatives; full softmax when the vocabulary is not larger (default 8192)")
    parser.add_argument("--vocab-size", type=int, default=100000, help="largest vocabulary incl. <S> </S> <UNK>")
    parser.add_argument("--min-count", type=int, default=1, help="least count of a word in the vocabulary")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--checkpoint-every", type=int, default=500, help="steps between checkpoints")
    parser.add_argument("--device",
                        help="cpu, cuda or cuda:N (default: the first GPU if torch can run on it, else cpu)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice); on a machine "
                        "shared with other jobs 1 thread can be much faster than oversubscribed cores")
    parser.add_argument("--precision", choices=PRECISIONS, default=d.precision,
                        help="bfloat16: mixed precision, the GEMMs in bfloat16, weights, optimizer and loss float32 "
                             "(README 'Reduced precision'); default float32")


def _settings(args) -> TrainingSettings:
    # before any work: --lr 0 (or --clip 0, every gradient scaled to nothing) trained nothing and wrote the biLM as
    # initialised, exit 0; --lr nan stopped in torch's Adagrad with a traceback
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise ElmoInputError(f"--lr: expected a finite number > 0, found {args.lr:g}")
    if not args.clip > 0:
        raise ElmoInputError(f"--clip: expected a number > 0 (inf: no clipping), found {args.clip:g}")
    if args.threads is not None:
        torch.set_num_threads(max(1, args.threads))
    args.device, line = resolve(args.device)  # refuses a GPU torch cannot run kernels on, before any work
    print(f"{getattr(args, 'command', 'pretrain')}: {line}{', bfloat16' if args.precision == 'bfloat16' else ''}",
          flush=True)
    for name in ("batch_size", "unroll", "negatives", "vocab_size", "tokens", "epochs"):
        if getattr(args, name, None) is not None and getattr(args, name) < 1:  # 0 tokens: an untrained biLM
            raise ElmoInputError(f"--{name.replace('_', '-')} must be at least 1, found {getattr(args, name)}")
    if getattr(args, "minutes", None) is not None and not args.minutes > 0:
        raise ElmoInputError(f"--minutes must be more than 0, found {args.minutes:g}")
    check_precision(args.precision, args.device)
    return TrainingSettings(args.batch_size, args.unroll, args.lr, args.clip, args.dropout, args.negatives, args.seed,
                            args.precision, args.vocab_size, args.min_count)


def _read(args, patterns, what, max_tokens=None) -> Corpus:
    corpus = read_corpus(expand_paths(patterns, what), TOKENIZERS[args.tokenize], args.skip_bad_lines,
                         max_tokens=max_tokens)
    if corpus.skipped:
        print(f"{what}: skipped {corpus.skipped} lines that are not valid UTF-8")
    return corpus


def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--options", required=True, help="options.json giving the model size (official layout)")
    parser.add_argument("--heldout", nargs="+", required=True, metavar="FILE_OR_GLOB", help="held-out text")
    parser.add_argument("--heldout-tokens", type=int, default=None, help="evaluate on at most this many tokens")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--tokens", type=int, help="stop after training on this many tokens (in total, over resumes)")
    budget.add_argument("--epochs", type=int, help="stop after this many epochs (default 10, the paper's)")
    parser.add_argument("--minutes", type=float, help="also stop after this many minutes of training (a resumable "
                        "checkpoint and the outputs are written as at any other stop)")
    parser.add_argument("--eval-every", type=int, default=0, help="held-out perplexity every N steps (0: start, end)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    _add_training_arguments(parser)


def run_pretrain(args) -> int:
    settings = _settings(args)
    options = BiLmOptions.load(args.options)
    options.n_characters = 262  # the written file is for inference (our char table has the masking row)
    out = Path(args.out)
    checkpoint_path = out / "checkpoint.pt"
    if checkpoint_path.exists() and not args.resume:
        raise ElmoInputError(f"'{checkpoint_path}' exists: pass --resume to continue it, or choose another --out")
    if args.resume and not checkpoint_path.is_file():
        raise ElmoInputError(f"--resume: '{checkpoint_path}' does not exist")
    checkpoint = read_checkpoint(checkpoint_path, options) if args.resume else None
    train = _read(args, args.train, "--train")
    heldout = _read(args, args.heldout, "--heldout", args.heldout_tokens)
    vocabulary = checkpoint["vocabulary"] if checkpoint else build_vocabulary(train, args.vocab_size, args.min_count)

    model = new_language_model(options, len(vocabulary), settings.dropout, settings.seed)
    model.to(args.device)
    trainer = LmTrainer(model, vocabulary, LmText(train, vocabulary, options.max_chars), settings)
    if checkpoint:
        trainer.restore(checkpoint, str(checkpoint_path))
    heldout_text = LmText(heldout, vocabulary, options.max_chars)
    out.mkdir(parents=True, exist_ok=True)

    eval_seconds = [0.0]

    def evaluate():
        started = time.perf_counter()
        result = heldout_perplexity(model, heldout_text, settings.batch_size, settings.unroll)
        trainer.history.append({"step": trainer.step, "tokens_trained": trainer.tokens, **result})
        eval_seconds[0] += time.perf_counter() - started
        return result

    if not trainer.history:
        evaluate()
    epochs = args.epochs if args.epochs is not None else (None if args.tokens is not None else 10)
    total = args.tokens if args.tokens is not None else epochs * trainer.tokens_per_epoch
    deadline = time.perf_counter() + 60 * args.minutes if args.minutes is not None else math.inf

    def done(t: LmTrainer) -> bool:
        budget_spent = t.tokens >= args.tokens if args.tokens is not None else t.epoch >= epochs
        return budget_spent or time.perf_counter() >= deadline
    print(f"vocabulary {len(vocabulary)} words, {train.n_tokens} training tokens in {len(train.types)} types, "
          f"{trainer.windows_per_epoch} windows of {settings.batch_size}x{settings.unroll} per epoch; "
          f"{'sampled softmax' if len(vocabulary) > settings.negatives else 'full softmax'}")

    resumed_at, saved = trainer.step if checkpoint else None, []  # saved: the steps this run checkpointed

    def after_step(t: LmTrainer, loss: float):
        if not math.isfinite(loss):
            raise ElmoInputError(f"training loss became {loss} at step {t.step}; lower --lr or --clip")
        if args.eval_every and t.step % args.eval_every == 0:
            evaluate()
        if t.step % args.checkpoint_every == 0:
            t.save_checkpoint(checkpoint_path)
            saved.append(t.step)

    progress = _Progress(total, min(trainer.tokens, total), "pretrain")
    started, tokens_before, eval_seconds[0] = time.perf_counter(), trainer.tokens, 0.0
    try:
        trainer.run(done, progress, after_step)
    finally:
        progress.close()
    seconds = time.perf_counter() - started - eval_seconds[0]  # training time only
    result = trainer.history[-1] if trainer.history[-1]["step"] == trainer.step else evaluate()
    # Every evaluation, the checkpoint's earlier ones too when resumed: a resumed run goes through the same check
    diverged = [h for h in trainer.history if not all(math.isfinite(h[k]) for k in ("forward", "backward", "average"))]
    if diverged:  # a finite training loss can hide it (--lr 1e4): a biLM at perplexity inf is no finished biLM
        h = diverged[0]
        if not checkpoint_path.exists():
            advice = ""
        elif resumed_at is not None and not saved and h["step"] > resumed_at:  # the checkpoint is from before it
            advice = f"; {checkpoint_path} is still the one this run resumed from (step {resumed_at}): resume it " \
                     f"with a lower --lr"
        else:  # it holds the diverged weights (written by this run or by the one resumed)
            advice = f" and remove {checkpoint_path} to start again"
        raise ElmoInputError(f"pretraining diverged: held-out perplexity forward {h['forward']}, backward "
                             f"{h['backward']} after {h['tokens_trained']} tokens (step {h['step']}); no biLM "
                             f"written to {out}: lower --lr (now {settings.lr:g}) or --clip{advice}")
    trainer.save_checkpoint(checkpoint_path)
    # a resumed run's perplexity.json describes the weights about to be replaced: gone until the new files are all
    # written, so a kill between them never leaves new weights beside the old record (or the reverse)
    (out / "perplexity.json").unlink(missing_ok=True)
    write_language_model(model, vocabulary, out)
    _write_json(out / "perplexity.json", {
        "heldout": result, "history": trainer.history, "vocabulary_size": len(vocabulary),
        "train_tokens_per_epoch": trainer.tokens_per_epoch, "epochs_completed": trainer.epoch,
        "skipped_lines": {"train": train.skipped, "heldout": heldout.skipped},
        "last_run": {"seconds": round(seconds, 1), "tokens": trainer.tokens - tokens_before,
                     "tokens_per_second": round((trainer.tokens - tokens_before) / max(seconds, 1e-9), 1),
                     "device": str(args.device), "threads": torch.get_num_threads(), "precision": settings.precision},
    })
    print(f"held-out perplexity: forward {result['forward']:.2f}, backward {result['backward']:.2f}, "
          f"average {result['average']:.2f} ({result['tokens']} tokens); wrote {out}/options.json, weights.hdf5, "
          f"softmax.hdf5, vocab.txt, perplexity.json")
    return 0


def add_finetune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source", help="a directory written by pretrain/finetune (options.json, "
                        "weights.hdf5, and softmax.hdf5 + vocab.txt if there)")
    parser.add_argument("--options", help="options.json (instead of or overriding --from)")
    parser.add_argument("--weights", help="weights hdf5, e.g. the official ones (instead of or overriding --from)")
    parser.add_argument("--softmax", help="softmax.hdf5 to continue the LM; without it a new softmax is initialised "
                        "over the vocabulary of --train")
    parser.add_argument("--vocab", help="vocab.txt that goes with --softmax")
    parser.add_argument("--dev", nargs="+", required=True, metavar="FILE_OR_GLOB", help="dev text for model choice")
    parser.add_argument("--epochs", type=int, default=1, help="default 1 (the paper's)")
    _add_training_arguments(parser)


def run_finetune(args) -> int:
    settings = _settings(args)
    files = {"options": args.options, "weights": args.weights, "softmax": args.softmax, "vocab": args.vocab}
    if args.source:
        source = Path(args.source)
        if not source.is_dir():
            raise ElmoInputError(f"--from '{source}' is not a directory")
        for key, name in (("options", "options.json"), ("weights", "weights.hdf5"), ("softmax", "softmax.hdf5"),
                          ("vocab", "vocab.txt")):
            if files[key] is None and (source / name).is_file():
                files[key] = str(source / name)
    for key in ("options", "weights"):
        if files[key] is None:
            raise ElmoInputError(f"finetune needs --{key} or a --from directory holding it")
    if (files["softmax"] is None) != (files["vocab"] is None):
        raise ElmoInputError("--softmax and --vocab go together (the softmax rows are the vocabulary's words)")
    out = Path(args.out)
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise ElmoInputError(f"--out '{out}' exists and is not empty; choose another --out (finetune creates it)")
    if args.epochs < 1:
        raise ElmoInputError(f"--epochs must be at least 1, found {args.epochs}")

    train = _read(args, args.train, "--train")
    dev = _read(args, args.dev, "--dev")
    torch.manual_seed(settings.seed)
    if files["softmax"]:
        model, vocabulary = load_language_model(files["options"], files["weights"], files["softmax"], files["vocab"],
                                                settings.dropout)
    else:  # official weights come without a softmax: a new one over the task text's vocabulary
        vocabulary = build_vocabulary(train, args.vocab_size, args.min_count)
        model = BiLanguageModel(load_bilm(files["options"], files["weights"]), len(vocabulary), settings.dropout)
    model.to(args.device)
    options = model.bilm.options
    trainer = LmTrainer(model, vocabulary, LmText(train, vocabulary, options.max_chars), settings)
    dev_text = LmText(dev, vocabulary, options.max_chars)
    # Every file goes into a sibling directory that is renamed to --out once perplexity.json is written: a kill
    # at any point leaves no --out (or the empty one given), never a weights.hdf5 without perplexity.json or
    # softmax and weights of different epochs. A partial directory left by a killed run is started afresh.
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)

    try:
        before = heldout_perplexity(model, dev_text, settings.batch_size, settings.unroll)
        print(f"dev perplexity before fine-tuning: average {before['average']:.2f}")
        epochs, best = [], None
        for epoch in range(1, args.epochs + 1):
            progress = _Progress(trainer.tokens_per_epoch, 0, f"finetune epoch {epoch}")
            try:
                trainer.run(lambda t: t.epoch >= epoch, progress)  # noqa: B023 (run calls it before returning)
            finally:
                progress.close()
            result = {"epoch": epoch, **heldout_perplexity(model, dev_text, settings.batch_size, settings.unroll)}
            epochs.append(result)
            print(f"epoch {epoch}: dev perplexity forward {result['forward']:.2f}, backward "
                  f"{result['backward']:.2f}, average {result['average']:.2f}")
            if best is None or result["average"] < best["average"]:  # the paper picks the epoch by dev perplexity
                best = result
                write_language_model(model, vocabulary, staging)
            pause_point("finetune-epoch-written")
        if not math.isfinite(best["average"]):  # nothing of a diverged model is written
            raise ElmoInputError(f"fine-tuning diverged: dev average perplexity {best['average']} after "
                                 f"{args.epochs} epoch(s), {before['average']:.2f} before; nothing written to {out} "
                                 f"(try a smaller --lr than {settings.lr})")
        worse = best["average"] > before["average"]
        if worse:  # kept all the same (the paper fixes the biLM after its fine-tuning epoch), but said
            print(f"warning: fine-tuning raised the dev perplexity: average {before['average']:.2f} before, "
                  f"{best['average']:.2f} after epoch {best['epoch']}, the best of {args.epochs}"
                  + ("" if files["softmax"] else " (before: a new, untrained softmax)"), file=sys.stderr)
        _write_json(staging / "perplexity.json", {
            "dev_before": before, "epochs": epochs, "best_epoch": best["epoch"], "dev": best,
            "worse_than_before": worse,
            "softmax": "loaded" if files["softmax"] else "new", "source": files, "precision": settings.precision,
            "vocabulary_size": len(vocabulary), "skipped_lines": {"train": train.skipped, "dev": dev.skipped},
        })
    except BaseException:  # an error or Ctrl-C: nothing of this run is kept
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(staging, out)  # one rename: all the files appear together (an empty --out is replaced)
    print(f"kept epoch {best['epoch']} (dev average perplexity {best['average']:.2f}, before "
          f"{before['average']:.2f}); wrote {out}/options.json, weights.hdf5, softmax.hdf5, vocab.txt")
    return 0

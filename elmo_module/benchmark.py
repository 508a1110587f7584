"""Speed of our ELMo against allennlp's ``Elmo`` on the same full-size random weights and batches, in one process.

    source env.sh; .venv/bin/python -m elmo_module.benchmark [--batches 16] [--batch-size 32] [--threads 2]
        [--no-token-cache] [--against plain] [--precision bfloat16]

(On torch 1.12, MKL_DEBUG_CPU_TYPE=5 doubled MKL's GEMM speed on AMD CPUs; torch 2.9.1's MKL 2024.2 ignores it.)

Full size = the released model's shape (2 x 4096 cells, 512 projection, 2048 char filters, 2 highway). Sentences of
10-35 tokens, words drawn from a Zipf distribution over 5,000 synthetic types (so words repeat as in real text).
Our token layer's cache of word vectors (``CharCnnTokenEncoder``) is emptied after the warm-up batch, so the timed
batches fill it as a real corpus would; ``--no-token-cache`` turns it off. Both run stateful (allennlp's default),
carrying state over the same batch sequence, batch by batch in turn (this VM's speed drifts by +-15 % over a minute;
interleaving puts the drift on both). Prints tokens/s of both, the ratio of the totals with its per-batch spread, and
the max |difference| of the ELMo output. ``--against plain`` puts ours with the LSTM steps on the plain MKL path
(``ELMO_ONEDNN=0``, what training runs) in allennlp's place, to time the oneDNN inference path (``elmo_module.lstm``).
``--precision bfloat16`` adds ours in bfloat16 (``elmo_module.precision``) to the same interleaved run: tokens/s of
all three, its ratios to ours in float32 and to the other, and how far its output is from float32's (max |difference|
and the mean cosine similarity of the ELMo vectors at the real tokens).
"""
import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

FULL_SIZE = {
    "lstm": {"use_skip_connections": True, "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096,
             "n_layers": 2},
    "char_cnn": {"activation": "relu", "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                                                   [7, 1024]], "n_highway": 2, "embedding": {"dim": 16},
                 "n_characters": 262, "max_characters_per_token": 50},
}


def write_full_size_weights(directory: Path, seed: int = 0):
    """Random weights of the released shape; the scales keep activations O(1) like the real model."""
    from elmo_module import BiLmOptions, ElmoBiLm, save_bilm

    torch.manual_seed(seed)
    options = BiLmOptions.from_dict(FULL_SIZE)
    bilm = ElmoBiLm(options)
    with torch.no_grad():
        for name, p in bilm.named_parameters():
            if p.dim() > 1 and "char_embed" not in name:
                p.normal_(0, 1.0 / np.sqrt(p.shape[1] * (p.shape[2] if p.dim() > 2 else 1)))
    save_bilm(bilm, directory / "options.json", directory / "weights.hdf5")
    return directory / "options.json", directory / "weights.hdf5"


def make_batches(n_batches: int, batch_size: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    types = ["".join(rng.choice(letters, size=rng.integers(1, 12))) for _ in range(5000)]
    p = 1.0 / np.arange(1, len(types) + 1)
    p /= p.sum()
    return [[[types[i] for i in rng.choice(len(types), size=rng.integers(10, 36), p=p)]
             for _ in range(batch_size)] for _ in range(n_batches)]


def time_interleaved(runs, batches):
    """Each batch through every model in turn (the first model alternating), so a slow spell of the shared machine
    falls on both: the ratio of the totals is far steadier than timing one model's whole run after the other's.
    Returns per model the seconds for each batch and the outputs."""
    seconds, outputs = [[] for _ in runs], [[] for _ in runs]
    for b, batch in enumerate(batches):
        order = range(len(runs)) if b % 2 == 0 else reversed(range(len(runs)))
        for m in order:
            start = time.perf_counter()
            outputs[m].append(runs[m](batch))
            seconds[m].append(time.perf_counter() - start)
    return seconds, outputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-token-cache", action="store_true",
                        help="recompute every word's token vector in every batch (the cache is on by default)")
    parser.add_argument("--against", choices=["allennlp", "plain"], default="allennlp",
                        help="plain: ours with the LSTM steps on MKL (ELMO_ONEDNN=0) in place of allennlp's Elmo")
    parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: also time ours in bfloat16, against ours in float32 and the other")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from allennlp.modules.elmo import Elmo as AllennlpElmo

    from elmo_module import Elmo, batch_to_ids, load_bilm, lstm

    with tempfile.TemporaryDirectory() as tmp:
        options, weights = write_full_size_weights(Path(tmp))
        ours = Elmo(load_bilm(options, weights, stateful=True), num_mixes=1, dropout=0.0).eval()
        low = None
        if args.precision == "bfloat16":
            low = Elmo(load_bilm(options, weights, stateful=True, precision="bfloat16"), num_mixes=1,
                       dropout=0.0).eval()
        if args.against == "plain":
            theirs = Elmo(load_bilm(options, weights, stateful=True), num_mixes=1, dropout=0.0).eval()
        else:
            theirs = AllennlpElmo(str(options), str(weights), num_output_representations=1, dropout=0.0).eval()
    ours_models = [ours, theirs] if args.against == "plain" else [ours]
    ours_models += [low] if low is not None else []
    if args.no_token_cache:
        for elmo in ours_models:
            elmo.bilm.token_encoder.cache_size = 0
    warmup, batches = make_batches(1, args.batch_size, seed=1), make_batches(args.batches, args.batch_size)
    n_tokens = sum(len(s) for b in batches for s in b)

    def run_theirs(batch):
        with torch.no_grad():
            if args.against == "allennlp":
                return theirs(batch_to_ids(batch))["elmo_representations"][0]
            onednn, lstm.USE_ONEDNN = lstm.USE_ONEDNN, False
            try:
                return theirs(batch_to_ids(batch))[0][0]
            finally:
                lstm.USE_ONEDNN = onednn

    def run_ours(batch):
        with torch.no_grad():
            return ours(batch_to_ids(batch))[0][0]

    def run_low(batch):
        with torch.no_grad():
            return low(batch_to_ids(batch))[0][0]

    runs = [run_theirs, run_ours] + ([run_low] if low is not None else [])
    time_interleaved(runs, warmup)  # first-call allocations; states reset below
    if args.against == "allennlp":
        theirs._elmo_lstm._elmo_lstm.reset_states()
    for elmo in ours_models:
        elmo.bilm.reset_states()
        elmo.bilm.token_encoder.clear_cache()
    seconds, outputs = time_interleaved(runs, batches)
    (their_seconds, our_seconds), (their_out, our_out) = seconds[:2], outputs[:2]
    their_time, our_time = sum(their_seconds), sum(our_seconds)
    per_batch = sorted(t / o for t, o in zip(their_seconds, our_seconds))
    diff = max(float((a - b).abs().max()) for a, b in zip(our_out, their_out))
    other = args.against
    result = {"tokens": n_tokens, "batches": args.batches, "batch_size": args.batch_size, "threads": args.threads,
              "against": other, "onednn": lstm.USE_ONEDNN,
              f"{other}_tokens_per_s": round(n_tokens / their_time, 1),
              "ours_tokens_per_s": round(n_tokens / our_time, 1),
              "speedup": round(their_time / our_time, 2),
              "per_batch_speedup_min_median_max": [round(per_batch[0], 2), round(float(np.median(per_batch)), 2),
                                                   round(per_batch[-1], 2)],
              "max_abs_diff": diff, "token_cache": not args.no_token_cache,
              "MKL_DEBUG_CPU_TYPE": os.environ.get("MKL_DEBUG_CPU_TYPE")}
    label = "allennlp Elmo" if other == "allennlp" else "ours on MKL"
    print(f"{label:14s}: {result[other + '_tokens_per_s']:8.1f} tokens/s")
    print(f"elmo_module   : {result['ours_tokens_per_s']:8.1f} tokens/s"
          f" (token cache {'on' if result['token_cache'] else 'off'})")
    print(f"ratio (ours / {other}): {result['speedup']:.2f}x (per batch: min %.2f, median %.2f, max %.2f)"
          % tuple(result["per_batch_speedup_min_median_max"]))
    print(f"max |difference| of the ELMo output: {diff:.2e}")
    if low is not None:
        result.update(low_precision_report(n_tokens, seconds, outputs, batches, other))
        print(f"elmo_module bfloat16: {result['bfloat16_tokens_per_s']:8.1f} tokens/s")
        print(f"ratio (bfloat16 / float32): {result['bfloat16_speedup_over_float32']:.2f}x, (bfloat16 / {other}): "
              f"{result['bfloat16_speedup_over_' + other]:.2f}x")
        print(f"bfloat16 against float32: max |difference| {result['bfloat16_max_abs_diff']:.2e}, mean cosine "
              f"similarity {result['bfloat16_mean_cosine']:.6f} (min {result['bfloat16_min_cosine']:.6f})")
    print(json.dumps(result))
    return result


def low_precision_report(n_tokens: int, seconds, outputs, batches, other: str) -> dict:
    """Speed of the bfloat16 run (third) against float32 (second) and the other (first), and its distance from
    float32's output at the real tokens (the ELMo vectors are zero past each sentence)."""
    their_time, our_time, low_time = (sum(s) for s in seconds)
    cosines, diff = [], 0.0
    for ours, low, batch in zip(outputs[1], outputs[2], batches):
        mask = torch.zeros(ours.shape[:2], dtype=torch.bool)
        for row, sentence in enumerate(batch):
            mask[row, :len(sentence)] = True
        cosines.append(torch.nn.functional.cosine_similarity(ours[mask], low[mask], dim=-1))
        diff = max(diff, float((ours - low).abs().max()))
    cosines = torch.cat(cosines)
    per_batch = sorted(o / b for o, b in zip(seconds[1], seconds[2]))
    return {"bfloat16_tokens_per_s": round(n_tokens / low_time, 1),
            "bfloat16_speedup_over_float32": round(our_time / low_time, 2),
            f"bfloat16_speedup_over_{other}": round(their_time / low_time, 2),
            "bfloat16_per_batch_speedup_over_float32_min_median_max": [
                round(per_batch[0], 2), round(float(np.median(per_batch)), 2), round(per_batch[-1], 2)],
            "bfloat16_max_abs_diff": diff, "bfloat16_mean_cosine": round(float(cosines.mean()), 6),
            "bfloat16_min_cosine": round(float(cosines.min()), 6)}


if __name__ == "__main__":
    main()

"""Our biLM's CPU speed under two Python environments (e.g. torch 1.12.1 and this project's torch 2.9.1), in one run.

    .venv/bin/python tools/torch_versions_bench.py --other /path/to/venv112/bin/python [--rounds 3] [--threads 1]
        [--other-env MKL_DEBUG_CPU_TYPE=5]

Each round runs one worker process per environment, alternating (this shared VM drifts by +-15 % over a minute;
alternation puts the drift on both). A worker times (a) the recurrent GEMM of a full-size LSTM step, W (16384 x 512)
@ h (512 x 32), in GFLOP/s (torch.mm, i.e. MKL; and, where torch has it, the same product through oneDNN with the
weight prepacked, as torch's inductor does on CPU), (b) our full-size ``Elmo`` forward pass as
``elmo_module.benchmark`` times it (same weights and batches, stateful, no autograd) in tokens/s, and (c) with
``--pretrain-tokens N``, pretraining: the mini profile's biLM (``runner/profiles/mini_bilm_options.json``: 2 x 512
cells, 50k vocabulary, 1,024 negatives) trained for N tokens on ``--pretrain-corpus`` by
``python -m elmo_module pretrain``, training tokens/s as its ``perplexity.json`` reports them (held-out evaluation
excluded). Prints the median of each and the ratio this environment / other. The other environment needs torch,
numpy, h5py (and tqdm for (c)); it imports ``elmo_module`` from this checkout.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pretrain_tokens_per_s(threads: int, tokens: int, corpus: str) -> float:
    """(c): one short pretraining run of the mini biLM, as the mini profile runs it, in a fresh directory."""
    with tempfile.TemporaryDirectory() as tmp:
        heldout = Path(tmp) / "heldout.txt"
        with open(corpus, encoding="utf-8") as f:
            heldout.write_text("".join(line for _, line in zip(range(50), f)), encoding="utf-8")
        subprocess.run([sys.executable, "-m", "elmo_module", "pretrain", "--options",
                        str(REPO / "runner/profiles/mini_bilm_options.json"), "--train", corpus, "--heldout",
                        str(heldout), "--heldout-tokens", "1000", "--vocab-size", "50000", "--negatives", "1024",
                        "--threads", str(threads), "--tokens", str(tokens), "--out", str(Path(tmp) / "lm")],
                       check=True, capture_output=True, text=True, cwd=REPO)
        return json.loads((Path(tmp) / "lm" / "perplexity.json").read_text())["last_run"]["tokens_per_second"]


def worker(threads: int, batches: int, pretrain_tokens: int = 0, corpus: str = "") -> dict:
    import torch

    torch.set_num_threads(threads)
    w, h = torch.randn(16384, 512), torch.randn(512, 32)
    for _ in range(20):
        torch.mm(w, h)
    reps, start = 200, time.perf_counter()
    for _ in range(reps):
        torch.mm(w, h)
    gflops = 2 * 16384 * 512 * 32 * reps / (time.perf_counter() - start) / 1e9
    onednn = None
    try:  # the same product through oneDNN, weight prepacked (these ops are not in torch 1.12)
        x, packed = h.t().contiguous(), torch.ops.mkldnn._reorder_linear_weight(w, 32)
    except (AttributeError, RuntimeError):
        packed = None
    if packed is not None:
        for _ in range(20):
            torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        start = time.perf_counter()
        for _ in range(reps):
            torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        onednn = 2 * 16384 * 512 * 32 * reps / (time.perf_counter() - start) / 1e9

    from elmo_module import Elmo, batch_to_ids, load_bilm
    from elmo_module.benchmark import make_batches, write_full_size_weights

    with tempfile.TemporaryDirectory() as tmp:  # as elmo_module.benchmark times ours
        options, weights = write_full_size_weights(Path(tmp))
        elmo = Elmo(load_bilm(options, weights, stateful=True), num_mixes=1, dropout=0.0).eval()
    warmup, data = make_batches(1, 32, seed=1), make_batches(batches, 32)
    with torch.no_grad():
        elmo(batch_to_ids(warmup[0]))
        tokens, start = 0, time.perf_counter()
        for batch in data:
            elmo(batch_to_ids(batch))
            tokens += sum(len(s) for s in batch)
    bilm_rate = tokens / (time.perf_counter() - start)
    return {"torch": torch.__version__, "gemm_gflops": gflops, "gemm_onednn_packed_gflops": onednn,
            "bilm_tokens_per_s": bilm_rate,
            "pretrain_tokens_per_s": (pretrain_tokens_per_s(threads, pretrain_tokens, corpus)
                                      if pretrain_tokens else None)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--other", help="the other environment's python (required)")
    p.add_argument("--other-env", action="append", default=[], help="NAME=VALUE set for the other environment only")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--pretrain-tokens", type=int, default=0,
                   help="also time pretraining the mini biLM for this many tokens (e.g. 128000; 0: skip)")
    p.add_argument("--pretrain-corpus", default=str(REPO.parent / "shared/data/lm_corpus/reuters21578_00.txt"),
                   help="raw text for --pretrain-tokens (default: a file of ../shared/data/lm_corpus)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.threads, args.batches, args.pretrain_tokens, args.pretrain_corpus)))
        return 0
    if not args.other or not Path(args.other).is_file():
        print(f"error: --other {args.other}: not a file (expected a python executable)", file=sys.stderr)
        return 2
    if args.pretrain_tokens and not Path(args.pretrain_corpus).is_file():
        print(f"error: --pretrain-corpus {args.pretrain_corpus}: not a file (expected raw text, one sentence per "
              f"line)", file=sys.stderr)
        return 2
    extra = dict(item.split("=", 1) for item in args.other_env)
    envs = {"this": (sys.executable, {}), "other": (args.other, extra)}
    results = {name: [] for name in envs}
    for round_ in range(args.rounds):
        for name in (envs if round_ % 2 == 0 else reversed(list(envs))):
            python, env = envs[name]
            out = subprocess.run([python, __file__, "--worker", "--threads", str(args.threads), "--batches",
                                  str(args.batches), "--pretrain-tokens", str(args.pretrain_tokens),
                                  "--pretrain-corpus", args.pretrain_corpus], cwd=REPO, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(REPO), **env})
            if out.returncode != 0:
                print(f"error: the {name} environment's worker failed: {out.stderr.strip().splitlines()[-1:]}",
                      file=sys.stderr)
                return 1
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1} {name}: {results[name][-1]}", flush=True)
    summary = {}
    for key in ("gemm_gflops", "gemm_onednn_packed_gflops", "bilm_tokens_per_s", "pretrain_tokens_per_s"):
        medians = {name: statistics.median(r[key] for r in runs) for name, runs in results.items()
                   if all(r[key] is not None for r in runs)}  # oneDNN's packed linear is not in torch 1.12
        if not medians:
            continue
        summary[key] = {f"{n} (torch {results[n][0]['torch']})": round(v, 1) for n, v in medians.items()}
        if len(medians) == 2:
            summary[key]["ratio this/other"] = round(medians["this"] / medians["other"], 2)
        print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in summary[key].items()))
    print(json.dumps({"threads": args.threads, "rounds": args.rounds, "other_env": extra, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

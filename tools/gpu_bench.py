"""GPU figures: ELMo inference and biLM pretraining steps, float32 against bfloat16 autocast, at batch 32
and 128, and a profiler summary of where a step's time goes (kernels against the host's per-step work). One process,
one device, everything interleaved as ``elmo_module.benchmark`` does (each batch or window through every variant in
turn), so the ratios are measured in one run. Prints a table last and writes gpu_bench.json and the profiler tables
to ``--out``.

    python3 tools/gpu_bench.py --out DIR                     # on a GPU machine (docs/speed.md#on-a-gpu)
    python3 tools/gpu_bench.py --device cpu --sizes mini --batch-sizes 4 --inference-batches 1 --steps 1 --out DIR

Inference: the full-size biLM (``elmo_module.benchmark.FULL_SIZE``, random weights), stateful, token cache on,
variants float32 (TF32 off: torch's default), float32 with TF32 matrix products, and bfloat16 autocast. Training:
``LmTrainer.train_step`` (windows of batch x 20 tokens, sampled softmax) of the mini biLM (1024 negatives) and the
full-size one (8192, bilm-tf's n_negative_samples_batch), float32 and bfloat16, each with the LSTM's kernels launched
one by one and replayed as CUDA graphs (``lstm._recurrence``; ``--device cpu`` has no graphs: both run alike), on
synthetic Zipf text of 50,000 word types (the device machine has no corpus). The plain-PyTorch stack runs there as
it is (no allennlp), so the allennlp ratio is not measured on GPU.
"""
import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from elmo_module import Elmo, batch_to_ids, load_bilm, lstm
from elmo_module.benchmark import FULL_SIZE, make_batches, write_full_size_weights
from elmo_module.options import BiLmOptions
from elmo_module.pretraining.corpus import TOKENIZERS, build_vocabulary, read_corpus
from elmo_module.pretraining.language_model import new_language_model
from elmo_module.pretraining.trainer import LmText, LmTrainer, TrainingSettings

MINI = Path(__file__).resolve().parent.parent / "runner" / "profiles" / "mini_bilm_options.json"


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device, fn, *args):
    synchronize(device)
    started = time.perf_counter()
    out = fn(*args)
    synchronize(device)
    return time.perf_counter() - started, out


def inference(args, device, batch_size, weights_dir):
    options, weights = weights_dir / "options.json", weights_dir / "weights.hdf5"
    models = {n: Elmo(load_bilm(options, weights, stateful=True, precision="float32" if n == "tf32" else n),
                      num_mixes=1, dropout=0.0).to(device).eval() for n in ("float32", "tf32", "bfloat16")}

    def run(name, batch):
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        torch.backends.cudnn.allow_tf32 = name == "tf32"
        try:
            with torch.no_grad():
                return models[name](batch_to_ids(batch).to(device))[0][0]
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    names = ["float32", "tf32", "bfloat16"]
    seconds, outputs = {n: [] for n in names}, {n: [] for n in names}
    warmup, batches = make_batches(2, batch_size, seed=1), make_batches(args.inference_batches, batch_size)
    # the same first batch (zero state) through a float32 copy on the CPU: the GPU path computes the same function
    with torch.no_grad():
        reference = Elmo(load_bilm(options, weights, stateful=True), num_mixes=1, dropout=0.0).eval()(
            batch_to_ids(warmup[0]))[0][0]
    gpu_vs_cpu = {}
    for b, batch in enumerate(warmup + batches):
        for name in (names if b % 2 == 0 else names[::-1]):
            took, out = timed(device, run, name, batch)
            if b == 0:
                gpu_vs_cpu[name] = float((out.float().cpu() - reference).abs().max())
            if b >= len(warmup):
                seconds[name].append(took)
                outputs[name].append(out.float().cpu())
    tokens = sum(len(s) for b in batches for s in b)
    cos = {n: torch.cat([torch.nn.functional.cosine_similarity(a[(a != 0).any(-1)], o[(a != 0).any(-1)], dim=-1)
                         for a, o in zip(outputs["float32"], outputs[n])]) for n in ("tf32", "bfloat16")}
    row = {"batch_size": batch_size, "batches": len(batches), "tokens": tokens,
           "max_abs_diff_from_cpu_float32_first_batch": gpu_vs_cpu}
    for n in names:
        row[f"{n}_tokens_per_s"] = round(tokens / sum(seconds[n]), 1)
        row[f"{n}_ms_per_batch_median"] = round(1000 * float(np.median(seconds[n])), 2)
    row["bfloat16_over_float32"] = round(sum(seconds["float32"]) / sum(seconds["bfloat16"]), 2)
    row["tf32_over_float32"] = round(sum(seconds["float32"]) / sum(seconds["tf32"]), 2)
    for n in ("tf32", "bfloat16"):
        row[f"{n}_mean_cosine"] = round(float(cos[n].mean()), 6)
        row[f"{n}_max_abs_diff"] = max(float((a - o).abs().max()) for a, o in zip(outputs["float32"], outputs[n]))
    return row, models["bfloat16"], batches


def synthetic_text(path: Path, n_tokens: int, n_types: int = 50000, seed: int = 0):
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    types = sorted({"".join(rng.choice(letters, size=rng.integers(2, 12))) for _ in range(n_types)})
    p = 1.0 / np.arange(1, len(types) + 1)
    ids = rng.choice(len(types), size=n_tokens, p=p / p.sum())
    with path.open("w") as f:
        for start in range(0, n_tokens, 25):
            f.write(" ".join(types[i] for i in ids[start:start + 25]) + "\n")


VARIANTS = [("float32", False), ("float32", True), ("bfloat16", False), ("bfloat16", True)]  # (precision, graphs)


def trainers(size, batch_size, device, corpus_path):
    """One trainer per variant, from the same initial weights; graphs: ``lstm._recurrence``'s CUDA graphs."""
    options = BiLmOptions.load(str(MINI)) if size == "mini" else BiLmOptions.from_dict(FULL_SIZE)
    options.n_characters = 262
    corpus = read_corpus([corpus_path], TOKENIZERS["simple"])
    vocabulary = build_vocabulary(corpus, 50000, 1)
    text = LmText(corpus, vocabulary, options.max_chars)
    out = {}
    for p, graphs in VARIANTS:
        model = new_language_model(options, len(vocabulary), 0.1, seed=0)
        settings = TrainingSettings(batch_size=batch_size, negatives=1024 if size == "mini" else 8192, precision=p)
        out[p, graphs] = LmTrainer(model.to(device), vocabulary, text, settings)
    return out, text.window_pairs(corpus.shuffled_ids(0, 0), batch_size, 20)


def label(variant):
    return variant[0] + ("+graphs" if variant[1] else "")


def training(args, device, size, batch_size, corpus_path):
    group, windows = trainers(size, batch_size, device, corpus_path)
    seconds, losses = {v: [] for v in group}, {v: [] for v in group}
    for step in range(2 + args.steps):  # two warm-up windows (the graphs' capture falls in the first)
        _, *window = next(windows)
        for v in (VARIANTS if step % 2 else VARIANTS[::-1]):
            lstm.USE_CUDA_GRAPHS = v[1]
            torch.manual_seed(1000 + step)  # the same dropout masks for every variant of a window
            took, loss = timed(device, group[v].train_step, *window)
            if step >= 2:
                seconds[v].append(took)
            losses[v].append(loss)
    tokens = batch_size * 20 * args.steps
    row = {"size": size, "batch_size": batch_size, "steps": args.steps}
    for v in group:
        row[f"{label(v)}_tokens_per_s"] = round(tokens / sum(seconds[v]), 1)
        row[f"{label(v)}_ms_per_step_median"] = round(1000 * float(np.median(seconds[v])), 2)
        row[f"{label(v)}_losses"] = [round(x, 4) for x in losses[v]]
    base = sum(seconds["float32", False])
    for v in VARIANTS[1:]:
        row[f"{label(v)}_over_float32"] = round(base / sum(seconds[v]), 2)
    for p in ("float32", "bfloat16"):  # the graphs compute what the eager kernels compute
        row[f"{p}_graphs_max_loss_diff"] = max(abs(a - b) for a, b in zip(losses[p, True], losses[p, False]))
    return row, group, windows


def profile(device, fn, n, out_file: Path):
    """Where the time of ``n`` calls goes: the wall time, the kernels' total, the launches, the top ops."""
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    synchronize(device)
    with torch.profiler.profile(activities=activities) as prof:
        started = time.perf_counter()
        for _ in range(n):
            fn()
        synchronize(device)
        wall = time.perf_counter() - started
    averages = prof.key_averages()
    kinds = ("cudaLaunch", "cuLaunch", "cudaGraphLaunch")
    launches = {e.key: e.count // n for e in averages if e.key.startswith(kinds)}
    sort = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    try:
        table = averages.table(sort_by=sort, row_limit=15)
    except Exception:  # newer torch names it self_device_time_total
        table = averages.table(sort_by="self_device_time_total", row_limit=15)
    out_file.write_text(table)
    # the kernels' total: the table's own footer (summing its rows would count an op and its kernels twice)
    found = re.search(r"Self (?:CUDA|device) time total: ([0-9.]+)(us|ms|s)", table)
    kernel_s = float(found.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[found.group(2)] if found else 0.0
    return {"calls": n, "wall_ms_per_call": round(1000 * wall / n, 2),
            "kernel_ms_per_call": round(1000 * kernel_s / n, 2),
            "gpu_busy_fraction": round(kernel_s / wall, 3) if wall else None,
            "launches_per_call": launches, "table": out_file.name}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--sizes", nargs="+", default=["mini", "full"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[32, 128])
    p.add_argument("--inference-batches", type=int, default=12)
    p.add_argument("--steps", type=int, default=8, help="timed training windows per variant (after 2 warm-ups)")
    p.add_argument("--budget", type=float, default=330, help="seconds; sections not started by then are skipped")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # one host thread issues the kernels (the two-stack thread pool stays off)
    begun = time.perf_counter()
    report = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
              "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
              "inference": [], "training": [], "profiles": {}, "skipped": []}
    print(json.dumps({k: report[k] for k in ("python", "torch", "cuda", "device")}), flush=True)

    def left():
        return args.budget - (time.perf_counter() - begun)

    def section(name, fn):
        if left() < 20:
            report["skipped"].append(name)
            return None
        try:
            result = fn()
        except Exception as e:  # one failing section must not cost the others (one lease, one run)
            report.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            return None
        print(name, json.dumps(result[0] if isinstance(result, tuple) else result), flush=True)
        (out / "gpu_bench.json").write_text(json.dumps(report, indent=1))
        return result

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "synthetic.txt"
        synthetic_text(corpus, 400_000)
        # B023: section() calls its closure at once (and profile() its function), within the loops' iteration
        for size in args.sizes:
            for bs in args.batch_sizes:
                got = section(f"training {size} batch {bs}", lambda: training(args, args.device, size, bs, corpus))  # noqa: B023
                if got:
                    report["training"].append(got[0])
                    if bs == max(args.batch_sizes) and size == args.sizes[-1]:
                        group, windows = got[1], got[2]
                        for graphs in (False, True):
                            def one_step():
                                lstm.USE_CUDA_GRAPHS = graphs  # noqa: B023 (called within this iteration)
                                group["bfloat16", graphs].train_step(*next(windows)[1:])  # noqa: B023
                            tag = "graphs" if graphs else "eager"
                            report["profiles"][f"training {size} bfloat16 {tag} batch {bs}"] = section(
                                f"profile training {tag}", lambda: profile(
                                    args.device, one_step, 3, out / f"profile_training_{size}_{bs}_{tag}.txt"))  # noqa: B023
                    del got
        write_full_size_weights(tmp)
        for bs in args.batch_sizes:
            got = section(f"inference batch {bs}", lambda: inference(args, args.device, bs, tmp))  # noqa: B023
            if got:
                report["inference"].append(got[0])
                model, batches = got[1], got[2]
                report["profiles"][f"inference bfloat16 batch {bs}"] = section(
                    f"profile inference {bs}", lambda: profile(args.device, lambda: model(  # noqa: B023
                        batch_to_ids(batches[0]).to(args.device)), 3, out / f"profile_inference_{bs}.txt"))  # noqa: B023
                del got
    report["seconds"] = round(time.perf_counter() - begun, 1)
    (out / "gpu_bench.json").write_text(json.dumps(report, indent=1))
    print(f"\n{report['device']}, torch {report['torch']}, Python {report['python']}; tokens/s, 1 host thread")
    for r in report["training"]:
        print(f"train {r['size']:4s} batch {r['batch_size']:3d}: " + "  ".join(
            f"{label(v)} {r[label(v) + '_tokens_per_s']:.0f}" for v in VARIANTS) + "  over float32: " + "  ".join(
            f"{r[label(v) + '_over_float32']:.2f}x" for v in VARIANTS[1:]) + f"  graphs' max loss diff "
            f"{r['float32_graphs_max_loss_diff']:.1e} / {r['bfloat16_graphs_max_loss_diff']:.1e}")
    for r in report["inference"]:
        print(f"infer full batch {r['batch_size']:3d}: float32 {r['float32_tokens_per_s']:9.0f}  tf32 "
              f"{r['tf32_tokens_per_s']:9.0f}  bfloat16 {r['bfloat16_tokens_per_s']:9.0f}  bf16/f32 "
              f"{r['bfloat16_over_float32']:.2f}x  cosine bf16 {r['bfloat16_mean_cosine']}")
    for name, prof in report["profiles"].items():
        if prof:
            print(f"profile {name}: {json.dumps(prof)}")
    print("skipped:", report["skipped"], "errors:", report.get("errors"))


if __name__ == "__main__":
    main()

"""Seconds per training batch of each task model at SIZE small on its real data: float32 against TASK_PRECISION
bfloat16, with and without the activation cache, interleaved batch by batch in one process (docs/speed.md).

    OMP_NUM_THREADS=1 .venv/bin/python tools/task_speed_bench.py [--tasks squad,coref,...] [--batches 4]
        [--warmup 1] [--variants float32,float32+cache,bfloat16,bfloat16+cache,float32-packed,float32-before,...]
        [--profile TASK:VARIANT] [--out F]

Each task: the small profile's config and data (runner/profiles/small.json task_knobs: paths, lambda, layer norm; the
ELMo placement of its Table 1 ELMo column), the first instances of its training file in its own batching (the bucket
sampler where the config has one, else seeded shuffled chunks), one model per variant from the same initial weights.
Each training step is what allennlp's trainer does (tensorise the batch, forward with the regularisation penalty,
backward, the config's gradient norm clip, the optimizer step); the bfloat16 variants run the forward under
tasks/task_precision.py's autocast and float32 module outputs. The variants take each batch in turn, the first
rotating, so the machine's drift falls on all; a batch's time is split into data (tensorising), forward, backward and
step. For SQuAD and coreference, float32-before and float32+cache-before run the code the small profile ran (before
the rearrangements of docs/speed.md "SQuAD and coreference training"), and their ratios are against float32-before.

Two stand-ins, as the small profile's artifacts (its biLMs, its word vectors) are not on every machine: the biLM is a
randomly initialised one of the small profile's shape (runner/profiles/mini_bilm_options.json: 2 x 512 cells, 128
projection), frozen as in every small run; the word vectors a random file of the profile's dimension (its trainable
flag as the config says), so every layer has the size the small profile's runs had. The activation cache (float16)
holds the sentences of the benchmarked instances only; its build time per sentence is printed, to set against the
biLM's per-batch cost it saves.
"""
import argparse
import copy
import cProfile
import itertools
import json
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TASKS = ("srl", "snli", "coref", "ner", "sst", "squad")
VARIANTS = ("float32", "float32+cache", "bfloat16", "bfloat16+cache", "float32-packed", "float32-before",
            "float32+cache-before")
# float32-packed: SNLI's and SST-5's LSTMs as their configs have them, allennlp's packed 'lstm'; the other variants of
# these two tasks swap in unpacked_lstm (tasks/unpacked_rnn.py, the same parameters: _unpack), a change the configs do
# not make (it would change the small profile's float rounding); elsewhere float32-packed is float32
PACKED_BEFORE = ("snli", "sst")
# -before: the computations that docs/speed.md ("SQuAD and coreference training") rearranged put back as they were
# (coreference: allennlp-models' pair scorer and attention head; SQuAD: torch's own GRU step loop), so that the same
# run measures the change; the ratios of these two tasks are against float32-before (the live biLM, the code the
# small profile ran)
REARRANGED = ("coref", "squad")
PHASES = ("data", "forward", "backward", "step")
GLOVE_DIM = {"squad": 300, "snli": 300, "coref": 300, "sst": 300, "srl": 100, "ner": 50}


def task_knobs(task: str, bilm: tuple, glove: str) -> dict:
    from tasks.knobs import KNOBS

    profile = json.loads((REPO / "runner" / "profiles" / "small.json").read_text())
    elmo = profile["sweep_overrides"]["table1"]["columns"][1]["knobs"]["ELMO"][task]
    knobs = {**KNOBS, **profile["knobs"], **profile["task_knobs"][task], "ELMO": elmo, "SEED": "1"}
    knobs.update(ELMO_OPTIONS=str(bilm[0]), ELMO_WEIGHTS=str(bilm[1]), GLOVE_PATH=glove, ELMO_CACHE="")
    from runner.paths import expand  # the profile's ${DATA_DIR} paths

    return {k: expand(str(v)) for k, v in knobs.items()}


def write_stand_ins(directory: Path):
    """The random mini biLM (the small profile's shape) and random word-vector files of each dimension."""
    from tests.elmo_fixtures import write_random_elmo

    mini = json.loads((REPO / "runner" / "profiles" / "mini_bilm_options.json").read_text())
    bilm = write_random_elmo(directory, filters=[tuple(f) for f in mini["char_cnn"]["filters"]],
                             n_highway=mini["char_cnn"]["n_highway"], projection_dim=mini["lstm"]["projection_dim"],
                             cell_dim=mini["lstm"]["dim"], n_layers=mini["lstm"]["n_layers"],
                             n_characters=mini["char_cnn"]["n_characters"],
                             char_dim=mini["char_cnn"]["embedding"]["dim"])
    rng = np.random.default_rng(0)
    glove = {}
    for dim in sorted(set(GLOVE_DIM.values())):
        path = directory / f"vectors.{dim}d.txt"
        with open(path, "w") as f:  # a few words: allennlp draws the others at random, as for words GloVe lacks
            for word in ("the", "The", ",", ".", "of", "and", "a", "to", "in"):
                f.write(word + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(dim) * 0.3) + "\n")
        glove[dim] = str(path)
    return bilm, glove


def read_task(task: str, knobs: dict, n_batches: int):
    """(params, vocab, the batches as lists of instances) of the first instances of the training file."""
    from allennlp.common import Params
    from allennlp.data import DatasetReader, Vocabulary
    from allennlp.data.samplers import BatchSampler

    params = Params.from_file(str(REPO / "jsonnet_configs" / f"{task}.jsonnet"), ext_vars=knobs)
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    loader = params.get("data_loader").as_dict()
    sampler = loader.get("batch_sampler")
    size = (sampler or loader).get("batch_size", 1)
    # twice the instances the batches need, so that the bucket sampler has lengths to sort as in a real epoch
    instances = list(itertools.islice(reader.read(params.pop("train_data_path")), 2 * n_batches * size))
    vocab = Vocabulary.from_params(params.pop("vocabulary", Params({})), instances=instances)
    for instance in instances:
        instance.index_fields(vocab)
    if sampler:
        order = list(BatchSampler.from_params(Params(dict(sampler))).get_batch_indices(instances))
    else:
        indices = list(range(len(instances)))
        random.Random(1).shuffle(indices)
        order = [indices[i:i + size] for i in range(0, len(indices), size)]
    batches = [[instances[i] for i in batch] for batch in order][:n_batches]
    return params, vocab, batches


def build_cache(batches, knobs: dict, directory: Path):
    from elmo_module.activation_cache import build_cache as build
    from elmo_module.activation_cache import file_checksum
    from elmo_module.weights import load_bilm
    from runner.stages.caches import instance_texts

    sentences = {tuple(s): None for batch in batches for instance in batch for s in instance_texts(instance)}
    bilm = load_bilm(knobs["ELMO_OPTIONS"], knobs["ELMO_WEIGHTS"], stateful=False)
    started = time.perf_counter()
    build(bilm, [list(s) for s in sentences], directory, file_checksum(knobs["ELMO_OPTIONS"], knobs["ELMO_WEIGHTS"]),
          progress=False)
    return len(sentences), time.perf_counter() - started


def _unpack(config):
    """Every one-layer allennlp 'lstm' of a model config as 'unpacked_lstm' (tasks/unpacked_rnn.py: the same
    parameters and names, on CPU without a PackedSequence)."""
    if isinstance(config, dict):
        if config.get("type") == "lstm" and config.get("num_layers", 1) == 1:
            config.pop("num_layers", None)
            config["type"] = "unpacked_lstm"
        for value in config.values():
            _unpack(value)
    elif isinstance(config, list):
        for value in config:
            _unpack(value)


def before(model):
    """The model's rearranged computations put back as the small profile's runs computed them."""
    from tasks.coref.model import SizedCoreferenceResolver, use_allennlp_paths
    from tasks.unpacked_rnn import UnpackedGru

    if isinstance(model, SizedCoreferenceResolver):
        use_allennlp_paths(model)
    for module in model.modules():
        if isinstance(module, UnpackedGru):
            module.fused_recurrence = False


class Variant:
    """One model and optimizer trained the way the trainer trains it, in one precision."""

    def __init__(self, name, params, vocab, cache_dir, task=""):
        from allennlp.common import Params
        from allennlp.models import Model
        from allennlp.training.optimizers import Optimizer

        from tasks.task_precision import float32_at_module_boundaries

        self.name, self.precision = name, name.split("+")[0].split("-")[0]
        model_params = copy.deepcopy(params.get("model").as_dict())
        if task in PACKED_BEFORE and name != "float32-packed":
            _unpack(model_params)
        if "+cache" in name:
            for embedder in model_params["text_field_embedder"]["token_embedders"].values():
                if embedder.get("type") == "elmo_module":
                    embedder["cache_dir"] = str(cache_dir)
        torch.manual_seed(1)  # the same initial weights in every variant
        self.model = Model.from_params(vocab=vocab, params=Params(model_params))
        self.model.train()
        trainer = params.get("trainer").as_dict()
        self.grad_norm = trainer.get("grad_norm")
        parameters = [[n, p] for n, p in self.model.named_parameters() if p.requires_grad]
        self.optimizer = Optimizer.from_params(model_parameters=parameters, params=Params(dict(trainer["optimizer"])))
        if self.precision == "bfloat16":
            float32_at_module_boundaries(self.model)
        if name.endswith("-before"):
            before(self.model)
        self.vocab = vocab
        self.times = {phase: [] for phase in PHASES}

    def step(self, instances, record: bool):
        from allennlp.data import Batch

        from elmo_module.precision import autocast

        t0 = time.perf_counter()
        tensors = Batch(instances).as_tensor_dict()
        t1 = time.perf_counter()
        with autocast(self.precision, "cpu"):
            output = self.model(**tensors)
            loss = output["loss"]
            penalty = self.model.get_regularization_penalty()
            if penalty is not None:
                loss = loss + penalty
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        if self.grad_norm:
            torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.grad is not None],
                                           self.grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        if record:
            for phase, seconds in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                self.times[phase].append(seconds)
        return float(loss.detach())

    def seconds_per_batch(self):
        return sum(np.sum(v) for v in self.times.values()) / len(self.times["data"])


def bench_task(task, args, bilm, glove, workdir: Path):
    knobs = task_knobs(task, bilm, glove[GLOVE_DIM[task]])
    started = time.perf_counter()
    params, vocab, batches = read_task(task, knobs, args.warmup + args.batches)
    read_s = time.perf_counter() - started
    cache_dir = workdir / f"cache-{task}"
    n_sentences, build_s = (build_cache(batches, knobs, cache_dir) if any("cache" in v for v in args.variants)
                            else (0, 0.0))
    names = [n for n in args.variants if (n != "float32-packed" or task in PACKED_BEFORE)
             and (not n.endswith("-before") or task in REARRANGED)]
    variants = [Variant(name, params, vocab, cache_dir, task) for name in names]
    profiled = args.profile.split(":") if args.profile else None
    profiler = cProfile.Profile()
    losses = {v.name: [] for v in variants}
    for i, batch in enumerate(batches):
        record = i >= args.warmup
        turn = variants[i % len(variants):] + variants[:i % len(variants)]
        for variant in turn:
            profile = record and profiled == [task, variant.name]
            if profile:
                profiler.enable()
            losses[variant.name].append(variant.step(batch, record))
            if profile:
                profiler.disable()
    result = {"task": task, "elmo": knobs["ELMO"], "batches": args.batches, "warmup": args.warmup,
              "instances_per_batch": [len(b) for b in batches[args.warmup:]], "read_s": round(read_s, 1),
              "cache_sentences": n_sentences, "cache_build_s": round(build_s, 2), "variants": {}}
    for v in variants:
        result["variants"][v.name] = {"s_per_batch": round(v.seconds_per_batch(), 4),
                                      **{f"{p}_s": round(float(np.mean(v.times[p])), 4) for p in PHASES},
                                      "losses": [round(x, 3) for x in losses[v.name]]}
    # against float32 as the small profile ran it: its own configs (packed LSTMs in SNLI and SST-5), the live biLM
    result["ratios_against"] = next((name for name in ("float32-packed", "float32-before")
                                     if name in result["variants"]), "float32")
    base = result["variants"].get(result["ratios_against"], {}).get("s_per_batch")
    if base:
        result["ratios"] = {name: round(base / r["s_per_batch"], 2) for name, r in result["variants"].items()}
    if profiled and profiled[0] == task:
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(25)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--batches", type=int, default=4, help="timed batches per task (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile", help="TASK:VARIANT: cProfile of that variant's timed steps (top 25, tottime)")
    parser.add_argument("--out", help="write the results as JSON")
    args = parser.parse_args(argv)
    args.variants = args.variants.split(",")
    unknown = [t for t in args.tasks.split(",") if t not in TASKS] + [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown task or variant {unknown[0]!r}: "
                     f"tasks {', '.join(TASKS)}; variants {', '.join(VARIANTS)}")
    torch.set_num_threads(args.threads)
    from allennlp.common.util import import_module_and_submodules

    for package in ("tasks", "elmo_module.allennlp_adapter"):
        import_module_and_submodules(package)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        bilm, glove = write_stand_ins(Path(tmp))
        for task in args.tasks.split(","):
            result = bench_task(task, args, bilm, glove, Path(tmp))
            results.append(result)
            cells = "  ".join(f"{name} {r['s_per_batch']:.3f} s ({result.get('ratios', {}).get(name, '-')}x; data "
                              f"{r['data_s']:.3f} fwd {r['forward_s']:.3f} bwd {r['backward_s']:.3f} step "
                              f"{r['step_s']:.3f})" for name, r in result["variants"].items())
            print(f"{task} (ELMO={result['elmo']}, {args.batches} batches of {result['instances_per_batch']}; ratios "
                  f"against {result['ratios_against']}; cache "
                  f"{result['cache_sentences']} sentences built in {result['cache_build_s']} s): {cells}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "threads": args.threads,
                                              "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()

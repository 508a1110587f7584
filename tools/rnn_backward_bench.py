"""Training steps of a task model with allennlp's packed ``gru`` / ``lstm`` encoders against ``unpacked_gru`` /
``unpacked_lstm`` (tasks/unpacked_rnn.py), on real batches, interleaved in one process; prints the median step times
and their ratio.

    OMP_NUM_THREADS=1 .venv/bin/python tools/rnn_backward_bench.py --task squad \
        --train ../shared/data/squad_small/train.json
    OMP_NUM_THREADS=1 .venv/bin/python tools/rnn_backward_bench.py --task coref \
        --train ../shared/data/litbank_coref/train

Both models are built from the task's jsonnet config with the same seed (so the same initial weights), differing only
in the encoders' type; the first step's losses (same dropout masks) are printed side by side. Knobs as for a run
(SIZE, GLOVE_PATH ...; defaults: SIZE small, no ELMo).
"""
import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# task: (the config's encoder keys, allennlp's type, ours)
ENCODERS = {"squad": (["phrase_encoder", "self_attention_encoder", "span_start_encoder", "span_end_encoder"],
                      "gru", "unpacked_gru"),
            "coref": (["context_layer"], "lstm", "unpacked_lstm")}


def build(task: str, kind: str, train: str, instances: int, seed: int):
    from allennlp.commands.train import TrainModel
    from allennlp.common import Params
    from allennlp.common.util import prepare_environment
    overrides = {"dataset_reader.max_instances": instances, "validation_dataset_reader.max_instances": 8,
                 "train_data_path": train, "validation_data_path": train, "random_seed": seed,
                 "numpy_seed": seed, "pytorch_seed": seed, "trainer.callbacks": []}
    overrides.update({f"model.{name}.type": kind for name in ENCODERS[task][0]})
    params = Params.from_file(str(REPO / f"jsonnet_configs/{task}.jsonnet"), params_overrides=overrides)
    prepare_environment(params)
    model = TrainModel.from_params(params=params, serialization_dir=tempfile.mkdtemp(prefix="rnnbench"), local_rank=0)
    return model.trainer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=sorted(ENCODERS), default="squad")
    p.add_argument("--train", required=True, help="the task's training data (a run's TRAIN_PATH)")
    p.add_argument("--instances", type=int, default=320)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    for knob, value in {"SIZE": "small", "ELMO": "none", "CUDA_DEVICE": "-1"}.items():
        os.environ.setdefault(knob, value)
    import torch
    from allennlp.common.util import import_module_and_submodules
    sys.path.insert(0, str(REPO))
    import_module_and_submodules("tasks")
    import_module_and_submodules("elmo_module.allennlp_adapter")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    _, theirs, ours = ENCODERS[args.task]
    trainers = {kind: build(args.task, kind, args.train, args.instances, args.seed) for kind in (theirs, ours)}
    batches = list(itertools.islice(iter(trainers[theirs].data_loader), args.steps + 1))
    times = {kind: [] for kind in trainers}
    for i, batch in enumerate(batches):
        for kind, trainer in trainers.items():
            torch.manual_seed(args.seed + i)  # the same dropout masks for both
            start = time.perf_counter()
            trainer.optimizer.zero_grad()
            loss = trainer.model(**batch)["loss"]
            loss.backward()
            trainer.optimizer.step()
            if i == 0:
                print(f"first step's loss, {kind}: {loss.item():.6f}")
            else:
                times[kind].append(time.perf_counter() - start)
    median = {kind: statistics.median(t) for kind, t in times.items()}
    print(f"{args.task}: {len(batches) - 1} steps (after one warm-up), {torch.get_num_threads()} thread(s), "
          f"torch {torch.__version__}")
    for kind, t in times.items():
        print(f"  {kind:14s} median {median[kind]:.3f} s/step (min {min(t):.3f}, max {max(t):.3f})")
    print(f"{ours} over {theirs}: {median[theirs] / median[ours]:.2f}x")


if __name__ == "__main__":
    main()

"""The preflight plan's GPU hours: a few training batches of each task's config timed on the GPU the runs will use
(runner/preflight/checks.py prints them after a clean check)."""
from pathlib import Path
from typing import Dict, List

from elmo_module import device as devices  # through the module: tests fake its answers
from runner.paths import repo_path
from runner.preflight.task_setup import bilm_sources, first_line, gpu_index, sample_file
from runner.profile import Profile
from runner.spec import bilm_outputs
from runner.task_configs import config_nodes, task_config

TIMED_BATCHES = 5


def gpu_plan(profile: Profile, runs, samples, scratch: Path, measure: bool) -> List[str]:
    """The plan's GPU-hour lines: measured (``measure``, on a usable GPU), or why not."""

    index = gpu_index(profile.device, runs)
    if index is None:
        return ["GPU hours: not estimated (the runs are to run on the CPU); run --check on the GPU machine for an "
                "estimate from a short timing there."]
    reason = devices.cuda_problem(index)
    if reason is not None:
        return [f"GPU hours: no estimate possible on this machine ({reason}); the estimate times a few training "
                f"batches of each task's paper-size config on the GPU the runs will use: run --check there."]
    if not measure:
        return ["GPU hours: run with --check for an estimate from a short timing on this GPU."]
    return [f"GPU hours per task, from {TIMED_BATCHES} timed training batches each on "
            f"{devices.describe(f'cuda:{index}')}:"] + gpu_hours(profile, runs, samples, scratch, index,
                                                                  bilm_outputs(profile))


def time_training_batches(task: str, knobs: Dict[str, str], data_file: Path, device: str,
                          batches: int = TIMED_BATCHES) -> float:
    """Seconds per training instance of the task's model as the run's config builds it (GloVe replaced by random
    vectors of its size: only the arithmetic is timed), over ``batches`` batches of the config's batch size after
    one warm-up batch: forward, backward and an optimizer step."""
    import time

    import torch
    from allennlp.common import Params
    from allennlp.data import Batch, DatasetReader, Vocabulary
    from allennlp.models import Model
    from allennlp.nn.util import move_to_device

    config = task_config(task, {**knobs, "ELMO_CACHE": ""})
    for _, node in config_nodes(config["model"]):
        node.pop("pretrained_file", None)
    reader = DatasetReader.from_params(Params(config["validation_dataset_reader"]))
    instances = list(reader.read(str(data_file)))
    vocab = Vocabulary.from_instances(instances)
    model = Model.from_params(vocab=vocab, params=Params(config["model"])).to(device)
    loader = config.get("data_loader", {})
    batch_size = int(loader.get("batch_size") or loader.get("batch_sampler", {}).get("batch_size", 32))
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    model.train()
    seconds, counted = 0.0, 0
    for step in range(batches + 1):
        chunk = [instances[(step * batch_size + i) % len(instances)] for i in range(batch_size)]
        batch = Batch(chunk)
        batch.index_instances(vocab)
        tensors = move_to_device(batch.as_tensor_dict(), torch.device(device))
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        optimizer.zero_grad()
        model(**tensors)["loss"].backward()
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if step > 0:  # the first batch pays for allocation and kernel selection
            seconds += time.perf_counter() - started
            counted += batch_size
    return seconds / counted


def instances_per_epoch(config: dict, knobs: dict, instances: int) -> float:
    """Training instances in one epoch of a run: its TRAIN_FRACTION of the file, or BATCHES_PER_EPOCH batches."""
    if knobs.get("BATCHES_PER_EPOCH"):  # an epoch of N batches, however large the (sub)set
        loader = config["data_loader"]
        return int(knobs["BATCHES_PER_EPOCH"]) * (loader.get("batch_size") or loader["batch_sampler"]["batch_size"])
    return instances * float(knobs["TRAIN_FRACTION"])


def gpu_hours(profile: Profile, runs, samples, scratch: Path, index: int, exclude: List[Path]) -> List[str]:
    """Per task: the measured seconds per training instance of its baseline and ELMo configs, times the training
    instances of every run (TRAIN_FRACTION) and its maximum epochs (an upper bound: early stopping ends sooner,
    validation passes not counted)."""
    lines = []
    for task in sorted({r.task for r in runs}):
        train = samples.get(task, {}).get("TRAIN_PATH")
        if train is None:
            lines.append(f"  {task}: no estimate (no training data read)")
            continue
        sample = _timing_file(task, runs, scratch)
        per_instance, hours = {}, 0.0
        for run in [r for r in runs if r.task == task]:
            k = run.knob_dict
            key = (k["ELMO"], k["ELMO_MIX"])
            if key not in per_instance:
                timed = {**k, "CUDA_DEVICE": str(index)}
                if run.uses_elmo and any(repo_path(k["ELMO_WEIGHTS"]).is_relative_to(d) for d in exclude):
                    sources = bilm_sources(profile.finetune)  # not fine-tuned yet: the weights it starts from
                    if sources:
                        timed["ELMO_OPTIONS"], timed["ELMO_WEIGHTS"] = sources[0]
                try:
                    per_instance[key] = time_training_batches(task, timed, sample, f"cuda:{index}")
                except Exception as e:  # the plan says why instead of stopping
                    lines.append(f"  {task} ELMo {key[0]}/{key[1]}: not timed ({first_line(e)})")
                    per_instance[key] = 0.0
            config = task_config(task, k)
            hours += per_instance[key] * instances_per_epoch(config, k, train.instances) * \
                config["trainer"]["num_epochs"] / 3600
        timings = ", ".join(f"ELMo {e}/{m}: {1000 * s:.2f} ms" for (e, m), s in sorted(per_instance.items()))
        lines.append(f"  {task}: <= {hours:,.0f} GPU hours for its {sum(r.task == task for r in runs)} runs "
                     f"(per training instance {timings}; ~{train.instances:,} training instances)")
    return lines


def _timing_file(task: str, runs, scratch: Path) -> Path:
    path = repo_path(next(r for r in runs if r.task == task).knob_dict["TRAIN_PATH"])
    if path.is_dir():
        from tasks.srl.conll2012_format import scan_conll2012  # (torch/allennlp behind it: loaded when this runs)

        return Path(scan_conll2012(str(path))[0][0])
    directory = scratch / f"{task}-timing"
    directory.mkdir(parents=True, exist_ok=True)
    return sample_file(path, directory)[0]

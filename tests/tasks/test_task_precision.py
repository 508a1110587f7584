"""TASK_PRECISION: bfloat16 mixed precision for the task model (tasks/task_precision.py): it trains, its master
weights stay float32, its loss and normalisations run in float32, it enters a run's identity only when set, and the
biLM inside it keeps its own precision (so the activation cache and the live biLM still agree)."""
import json
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO_ROOT, needs_cpu_bfloat16

pytestmark = pytest.mark.usefixtures("one_thread")


def _epoch_losses(serialization_dir: Path) -> list:
    files = sorted(serialization_dir.glob("metrics_epoch_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    return [json.loads(p.read_text())["training_loss"] for p in files]


def test_bfloat16_training_lowers_the_loss_and_keeps_float32_master_weights(train_task):
    fast = {"trainer.optimizer.lr": 0.05}  # the tiny NER on its 6 sample sentences, in a few epochs
    model, directory = train_task("ner", fast, TASK_PRECISION="bfloat16", NUM_EPOCHS=5, ELMO="input")
    config = json.loads((directory / "config.json").read_text())
    assert {"type": "task_precision", "precision": "bfloat16"} in config["trainer"]["callbacks"]
    losses = _epoch_losses(directory)
    assert len(losses) == 5 and losses[-1] < 0.7 * losses[0], losses
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())
    # the same training in float32 (same seed) differs from it by rounding only: bfloat16 was in effect
    _, plain = train_task("ner", fast, TASK_PRECISION="float32", NUM_EPOCHS=5, ELMO="input")
    plain_config = json.loads((plain / "config.json").read_text())
    assert all(c["type"] != "task_precision" for c in plain_config["trainer"]["callbacks"])
    float32_losses = _epoch_losses(plain)
    assert float32_losses != losses
    assert all(abs(a - b) <= 0.1 * b for a, b in zip(losses, float32_losses)), (losses, float32_losses)


def test_under_bfloat16_the_products_are_bfloat16_and_the_loss_and_logits_float32(task_env):
    """What the callback sets up: autocast around the forward, every module's output handed on as float32. The CRF
    (a logsumexp over tags and time) and the loss then run in float32; on CPU autocast alone would leave a linear
    layer's bfloat16 output bfloat16 through log_softmax / logsumexp."""
    from allennlp.common import Params
    from allennlp.common.plugins import import_plugins
    from allennlp.data import Batch, DatasetReader, Vocabulary
    from allennlp.models import Model

    from elmo_module.precision import autocast
    from tasks.task_precision import float32_at_module_boundaries

    import_plugins()
    task_env(ELMO="input")
    params = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / "ner.jsonnet"))
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    instances = list(reader.read(params.pop("train_data_path")))
    vocab = Vocabulary.from_instances(instances)
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    batch = Batch(instances[:4])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    seen = {}

    def spy(module, inputs, output):
        seen.setdefault("projection", output.dtype)
    model.tag_projection_layer._module.register_forward_hook(spy)
    float32_at_module_boundaries(model)  # registered after the spy: the spy sees the raw output
    with autocast("bfloat16", "cpu"):
        output = model(**tensors)
    assert seen["projection"] == torch.bfloat16  # the product ran in bfloat16 ...
    assert output["logits"].dtype == torch.float32 and output["loss"].dtype == torch.float32  # ... handed on as float32
    output["loss"].backward()
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())


def test_the_knob_enters_a_runs_identity_only_when_bfloat16_and_archived_runs_keep_theirs():
    from runner.profile import load_profile
    from runner.spec import Run, expand_cells, load_sweeps
    from tasks.knobs import KNOBS, knob_problems

    default = Run("ner", tuple(sorted(KNOBS.items())))
    low = Run("ner", tuple(sorted({**KNOBS, "TASK_PRECISION": "bfloat16"}.items())))
    without = Run("ner", tuple(sorted((k, v) for k, v in KNOBS.items() if k != "TASK_PRECISION")))
    assert default.run_id == without.run_id and default.run_id != low.run_id
    assert default.cache_key == low.cache_key  # the biLM's activations do not depend on the task model's precision
    assert knob_problems({"TASK_PRECISION": "float16"}) == [
        "knob TASK_PRECISION = 'float16': expected float32 | bfloat16"]
    # every run of the small profile, planned by today's code, is one that results/small archived (125 runs)
    archived = {p.stem for p in (REPO_ROOT / "results" / "small" / "runs").glob("*/*.json")
                if not p.name.endswith(".predictions.json")}
    if not archived:
        pytest.skip("results/small/runs not present")
    profile, path = load_profile("small")
    planned = {c.run.run_id for c in expand_cells(profile, load_sweeps(profile, path))}
    assert planned and planned <= archived, sorted(planned - archived)[:5]


def test_the_live_bilm_keeps_its_precision_inside_a_bfloat16_task_run(tmp_path):
    """ELMO_PRECISION=float32 inside TASK_PRECISION=bfloat16: the biLM switches the enclosing autocast off, so the
    live biLM gives the task model the layers of a float32 run, as the (float32-built) activation cache does: the
    two agree to the cache's float16 rounding, as outside autocast (tests/elmo_module/test_activation_cache.py)."""
    from elmo_module import batch_to_ids, load_bilm
    from elmo_module.activation_cache import build_cache, file_checksum
    from elmo_module.allennlp_adapter import ElmoTokenEmbedder
    from elmo_module.precision import autocast
    from tests.elmo_fixtures import SENTENCES, write_random_elmo
    from tests.elmo_module.test_activation_cache import ATOL, RTOL

    options, weights = write_random_elmo(tmp_path, seed=21)
    bilm = load_bilm(options, weights, stateful=False)
    directory = build_cache(bilm, SENTENCES, tmp_path / "cache", file_checksum(options, weights), progress=False)
    torch.manual_seed(0)
    live = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0)
    torch.manual_seed(0)
    from_cache = ElmoTokenEmbedder(str(options), str(weights), dropout=0.0, cache_dir=str(directory))
    ids = batch_to_ids(SENTENCES[:4])
    with torch.no_grad():
        reference = bilm(ids).layers
        bound = RTOL * torch.stack([layer.abs() for layer in reference]).mean(dim=0) + ATOL
        with autocast("bfloat16", "cpu"):
            inside = bilm(ids).layers
            live_mix, cached_mix = live(ids), from_cache(ids)
    for a, b in zip(inside, reference):
        assert a.dtype == torch.float32 and torch.allclose(a, b, atol=1e-6)
    assert ((live_mix.float() - cached_mix.float()).abs() <= bound).all()


def test_the_runner_flag_sets_the_knob_of_every_run_and_leaves_the_biLM_precision(tmp_path):
    from runner.__main__ import parse_args
    from runner.pipeline import plan_from

    common = ["--profile", "default", "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res")]
    plain = plan_from(parse_args(common))[1]
    low = plan_from(parse_args(common + ["--task-precision", "bfloat16"]))[1]
    assert {r.knob_dict["TASK_PRECISION"] for r in plain.runs} == {"float32"}
    assert {r.knob_dict["TASK_PRECISION"] for r in low.runs} == {"bfloat16"}
    assert {r.knob_dict["ELMO_PRECISION"] for r in low.runs} == {"float32"}
    assert [r.cache_key for r in low.runs] == [r.cache_key for r in plain.runs]  # the same activation caches
    assert not {r.run_id for r in low.runs} & {r.run_id for r in plain.runs}


@pytest.mark.parametrize("task,elmo", [("srl", "input"), ("snli", "both"),
                                       pytest.param("coref", "input", marks=needs_cpu_bfloat16), ("sst", "both"),
                                       ("squad", "both")])
def test_every_task_trains_in_bfloat16(train_task, task, elmo):
    """The ELMo placement of each task's Table 1 column in the small profile. BCN's self-attention product reaches
    allennlp's masked_softmax as bfloat16 (it is computed in the model's forward, not in a module): without softmax
    on CPU autocast's float32 list that was a TypeError from allennlp's tiny_value_of_dtype."""
    model, directory = train_task(task, TASK_PRECISION="bfloat16", NUM_EPOCHS=1, ELMO=elmo)
    assert (directory / "model.tar.gz").is_file()
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_softmax_log_softmax_and_logsumexp_are_float32_under_cpu_autocast():
    import tasks.task_precision  # noqa: F401  (puts them on CPU autocast's float32 list)

    a = torch.randn(2, 5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = a.bmm(a.transpose(1, 2))  # a product in bfloat16, as BCN's self-attention
        assert logits.dtype == torch.bfloat16
        assert {torch.softmax(logits, -1).dtype, torch.nn.functional.log_softmax(logits, -1).dtype,
                logits.logsumexp(-1).dtype} == {torch.float32}
    assert torch.softmax(logits, -1).dtype == torch.bfloat16  # outside autocast nothing changes


def test_the_accuracy_check_profile_pairs_each_bfloat16_run_with_its_float32_twin_of_the_small_profile():
    """runner/profiles/small_task_bf16.json: NER's and SNLI's Table 1 ELMo cells of the small profile, trained twice on
    the same stages, float32 and bfloat16: each float32 run is the small profile's own run (its archived id), and each
    bfloat16 run differs from it in TASK_PRECISION alone."""
    from runner.profile import load_profile
    from runner.spec import Run, expand_cells, load_sweeps

    runs_dir = REPO_ROOT / "results" / "small" / "runs"
    if not runs_dir.is_dir():
        pytest.skip("results/small/runs not present")
    profile, path = load_profile("small_task_bf16")
    cells = expand_cells(profile, load_sweeps(profile, path))
    by = {(c.task, c.column, c.seed): c.run for c in cells}
    assert sorted(by) == [(t, col, s) for t in ("ner", "snli") for col in ("ELMo", "ELMo bfloat16") for s in (1, 2, 3)]
    for (task, column, seed), run in by.items():
        if column == "ELMo":
            assert (runs_dir / task / f"{run.run_id}.json").is_file(), run.run_id
            continue
        assert run.knob_dict["TASK_PRECISION"] == "bfloat16"
        twin = Run(task, tuple(sorted({**run.knob_dict, "TASK_PRECISION": "float32"}.items())))
        assert twin.run_id == by[(task, "ELMo", seed)].run_id


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_bfloat16_training_on_cuda_keeps_float32_master_weights(train_task):
    model, directory = train_task("ner", {"trainer.optimizer.lr": 0.05}, TASK_PRECISION="bfloat16", NUM_EPOCHS=5,
                                  ELMO="input", CUDA_DEVICE=0)
    losses = _epoch_losses(directory)
    assert losses[-1] < 0.7 * losses[0], losses
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.real_data
@needs_cpu_bfloat16  # its SST-5 variants swap in unpacked_lstm: torch's LSTM on a padded batch
def test_the_speed_benchmark_times_each_variant_on_the_real_data(tmp_path):
    from tests.conftest import shared_data
    from tools.task_speed_bench import main

    shared_data("sst_trees", "train.txt")
    out = tmp_path / "bench.json"
    main(["--tasks", "sst", "--batches", "1", "--warmup", "0", "--variants", "float32,bfloat16+cache,float32-packed",
          "--out", str(out)])
    result = json.loads(out.read_text())["results"][0]
    assert result["task"] == "sst" and result["ratios_against"] == "float32-packed"
    assert set(result["variants"]) == {"float32", "bfloat16+cache", "float32-packed"}
    assert all(v["s_per_batch"] > 0 and len(v["losses"]) == 1 for v in result["variants"].values())
    # the same initial weights and batch: the first losses agree to bfloat16's rounding
    losses = [v["losses"][0] for v in result["variants"].values()]
    assert max(losses) - min(losses) <= 0.05 * max(losses), losses

"""Every variant of every shipped task config builds, and the shared knobs (elmo.libsonnet) do what they say."""
import os
import random
from functools import lru_cache

import pytest
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Vocabulary
from allennlp.models import Model

from runner.execution.training import child_pythonpath
from tests.conftest import REPO_ROOT

CONFIGS = sorted(path.stem for path in (REPO_ROOT / "jsonnet_configs").glob("*.jsonnet"))
PLACEMENTS = ["input", "output", "both"]
MIXES = ["weighted", "last_only", "average"]
VARIANTS = [("none", "weighted")] + [(placement, mix) for placement in PLACEMENTS for mix in MIXES]


def config_params(task: str) -> Params:
    return Params.from_file(str(REPO_ROOT / "jsonnet_configs" / f"{task}.jsonnet"))


@lru_cache(maxsize=None)
def sample_vocabulary(task: str) -> Vocabulary:
    """The vocabulary of the task's bundled training and dev samples, read with the baseline config's readers."""
    params = config_params(task)
    train_reader = DatasetReader.from_params(params.pop("dataset_reader"))
    dev_reader = DatasetReader.from_params(params.pop("validation_dataset_reader"))
    instances = list(train_reader.read(params.pop("train_data_path")))
    instances += list(dev_reader.read(params.pop("validation_data_path")))
    return Vocabulary.from_instances(instances)


@pytest.fixture
def knobs(task_env):
    from allennlp.common.plugins import import_plugins

    import_plugins()
    return task_env


def test_the_six_task_configs_are_shipped():
    assert {"ner", "sst", "snli", "squad"} <= set(CONFIGS)


@pytest.mark.parametrize("task", CONFIGS)
@pytest.mark.parametrize("placement, mix", VARIANTS)
def test_every_variant_builds(knobs, task, placement, mix):
    vocab = sample_vocabulary(task)  # baseline readers; the ELMo indexer needs no vocabulary
    knobs(ELMO=placement, ELMO_MIX=mix)
    params = config_params(task)
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    # One scalar mix per placement; with both, the output mix is a second, separate set of weights (Sec. 3.3).
    mixes = [module.placement for module in model.modules() if type(module).__name__ == "ScalarMix"]
    assert mixes == {"none": [], "input": ["input"], "output": ["output"], "both": ["input", "output"]}[placement]
    mix_weights = [name for name, _ in model.named_parameters() if name.endswith("mix_weights")]
    assert len(mix_weights) == (len(mixes) if mix == "weighted" else 0) or mix == "average", mix_weights
    encoders = [type(module).__name__ for module in model.modules()]
    assert ("ElmoOutputEncoder" in encoders) == (placement in ("output", "both"))
    # The lambda * sum(w^2) penalty (Sec. 3.2) applies only to the weighted mix.
    regexes = [regex for regex, _ in model._regularizer._regularizers] if model._regularizer else []
    assert ("mix_weights" in regexes) == (placement != "none" and mix == "weighted")


def test_knobs_reach_trainer_seeds_and_embeddings(knobs):
    knobs(SEED=7, CUDA_DEVICE=-1, NUM_EPOCHS=3, GLOVE_PATH="/data/glove.6B.50d.txt", ELMO="input",
          ELMO_OPTIONS="my_options.json", ELMO_WEIGHTS="my_weights.hdf5", ELMO_LAMBDA=0.5)
    params = config_params("ner").as_dict()
    assert (params["random_seed"], params["numpy_seed"], params["pytorch_seed"]) == (7, 7, 7)
    assert (params["trainer"]["num_epochs"], params["trainer"]["cuda_device"]) == (3, -1)
    assert {"type": "elmo_mix_weights"} in params["trainer"]["callbacks"]
    words = params["model"]["text_field_embedder"]["token_embedders"]["tokens"]
    assert words["pretrained_file"] == "/data/glove.6B.50d.txt" and words["embedding_dim"] == 50
    elmo = params["model"]["text_field_embedder"]["token_embedders"]["elmo_module"]
    assert (elmo["options_file"], elmo["weight_file"], elmo["placement"]) == (
        "my_options.json", "my_weights.hdf5", "input")
    assert params["model"]["regularizer"]["regexes"] == [["mix_weights", {"type": "l2", "alpha": 0.5}]]
    assert params["dataset_reader"]["token_indexers"]["elmo_module"] == {"type": "elmo_module_characters"}


def test_wandb_and_activation_cache_knobs(knobs):
    callbacks = config_params("snli").as_dict()["trainer"]["callbacks"]
    assert {"type": "wandb"} not in [{"type": c["type"]} for c in callbacks]
    knobs(WANDB="true", ELMO="both", ELMO_CACHE="/tmp/activations")
    params = config_params("snli").as_dict()
    assert [c["type"] for c in params["trainer"]["callbacks"]] == ["unit_predictions", "random_state",
                                                                   "elmo_mix_weights", "wandb"]
    assert params["model"]["text_field_embedder"]["token_embedders"]["elmo_module"]["cache_dir"] == "/tmp/activations"


def test_data_path_knobs_replace_the_bundled_samples(knobs):
    assert config_params("ner")["train_data_path"] == "tasks/ner/sample_data/train.txt"
    knobs(TRAIN_PATH="/data/eng.train", DEV_PATH="/data/eng.testa", TEST_PATH="/data/eng.testb")
    params = config_params("ner")
    assert (params["train_data_path"], params["validation_data_path"], params["test_data_path"]) == (
        "/data/eng.train", "/data/eng.testa", "/data/eng.testb")


def test_unknown_knob_value_is_refused(knobs):
    """The rules live in tasks/knobs.py alone (the configs hold no copy): what `allennlp` checks when it loads
    tasks.allennlp_plugin, and the runner before any run."""
    from tasks.knobs import knob_problems

    knobs(ELMO="top")
    assert knob_problems(os.environ) == ["knob ELMO = 'top': expected none | input | output | both"]
    knobs(ELMO="none", WORD_VECTORS="false")  # no token representation at all
    assert knob_problems(os.environ) == ["knob WORD_VECTORS = 'false': expected ELMO=input or both beside it, "
                                         "found ELMO='none'"]


def test_train_fraction_is_a_seeded_random_subsample_and_validation_stays_whole(knobs):
    knobs(TRAIN_FRACTION=0.5, SEED=3)
    params = config_params("ner")
    assert params["validation_dataset_reader"]["type"] == "conll2003_checked"
    train_reader = DatasetReader.from_params(params.pop("dataset_reader"))
    path = "tasks/ner/sample_data/train.txt"
    first_words = [i["tokens"].tokens[0].text for i in train_reader.read(path)]
    all_first_words = ["Maria", "The", "Fans", "Tomas", "Paris", "Anna"]
    expected = sorted(random.Random(3).sample(range(6), 3))  # round(0.5 * 6) = 3, chosen by Random(SEED)
    assert first_words == [all_first_words[i] for i in expected]
    assert first_words != all_first_words[:3]  # not the first N (true for seed 3)
    assert [i["tokens"].tokens[0].text for i in train_reader.read(path)] == first_words  # reproducible


@pytest.mark.parametrize("task", ["snli", "squad"])
def test_baseline_and_elmo_runs_of_a_seed_train_on_the_same_subset(knobs, task):
    """Figure 1 compares the baseline and ELMo at a training fraction seed by seed: both must see the same examples.
    The ELMo config adds an indexer; the subset must depend on SEED and TRAIN_FRACTION only."""
    def subset(elmo, seed):
        knobs(TRAIN_FRACTION=0.5, SEED=seed, ELMO=elmo)
        params = config_params(task)
        reader = DatasetReader.from_params(params.pop("dataset_reader"))
        instances = list(reader.read(params.pop("train_data_path")))
        def text(f):
            return [t.text for t in f.tokens] if hasattr(f, "tokens") else getattr(f, "label", None)
        return [[(name, text(f)) for name, f in sorted(i.fields.items())] for i in instances]

    baseline = subset("none", 2)
    assert baseline and subset("both", 2) == baseline and subset("input", 2) == baseline
    assert any(subset("none", s) != baseline for s in (3, 4, 5))  # another seed, another subset


def test_subsample_keeps_at_least_one_and_rejects_bad_fractions():
    from tasks.ner.conll2003_reader import CheckedConll2003Reader
    from tasks.subsample import RandomSubsampleReader

    tiny = RandomSubsampleReader(CheckedConll2003Reader(), fraction=0.001, seed=1)
    assert len(list(tiny.read(str(REPO_ROOT / "tasks/ner/sample_data/train.txt")))) == 1
    with pytest.raises(ConfigurationError, match="fraction must be in"):
        RandomSubsampleReader(CheckedConll2003Reader(), fraction=0.0)


@pytest.mark.parametrize("task", CONFIGS)
@pytest.mark.parametrize("size", ["paper", "small"])
def test_paper_and_small_sizes_build_with_elmo_at_both(knobs, task, size):
    vocab = sample_vocabulary(task)
    knobs(ELMO="both", SIZE=size)
    model = Model.from_params(vocab=vocab, params=config_params(task).pop("model"))
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) > 0


@pytest.mark.parametrize("task", ["ner", "squad", "coref"])
def test_character_embeddings_are_sized_by_the_character_vocabulary(knobs, task):
    """Embedding's vocab_namespace defaults to "tokens": without it the char-CNN's table would have one row per word."""
    vocab = sample_vocabulary(task)
    model = Model.from_params(vocab=vocab, params=config_params(task).pop("model"))
    embedder = getattr(model, "text_field_embedder", None) or model._text_field_embedder  # coref: private name
    characters = embedder.token_embedder_token_characters._embedding._module
    assert characters.num_embeddings == vocab.get_vocab_size("token_characters")


def test_glove_path_gives_pretrained_word_vectors(knobs, tmp_path):
    glove = tmp_path / "glove.txt"
    lisbon = [0.5] * 50
    glove.write_text("lisbon " + " ".join(map(str, lisbon)) + "\noslo " + " ".join(["-1.0"] * 50) + "\n")
    knobs(GLOVE_PATH=str(glove))
    vocab = sample_vocabulary("ner")
    model = Model.from_params(vocab=vocab, params=config_params("ner").pop("model"))
    weights = model.text_field_embedder.token_embedder_tokens.weight
    assert weights[vocab.get_token_index("lisbon", "tokens")].tolist() == lisbon
    assert weights[vocab.get_token_index("oslo", "tokens")].tolist() == [-1.0] * 50


@pytest.mark.parametrize("task", CONFIGS)
def test_training_batches_are_shuffled(knobs, task):
    # AllenNLP 2's data loader keeps file order unless told to shuffle (allennlp 0.x iterators, which the paper-era
    # configs ran with, shuffled every epoch); the bucket sampler shuffles its batches by default.
    for size in ("paper", "small", "tiny"):
        knobs(SIZE=size)
        loader = config_params(task).as_dict()["data_loader"]
        sampler = loader.get("batch_sampler") or {}
        assert loader.get("shuffle") is True or (sampler.get("type") == "bucket" and sampler.get("shuffle", True)), size


@pytest.mark.parametrize("task, dim, variable", [("srl", 100, "GLOVE_6B_100D"), ("ner", 50, "GLOVE_6B_50D"),
                                                 ("coref", 300, "GLOVE_840B_300D")])
def test_paper_profile_gives_each_task_the_glove_its_paper_size_config_reads(knobs, monkeypatch, task, dim, variable):
    from runner import spec
    from runner.profile import load_profile

    for name in ("GLOVE_6B_100D", "GLOVE_6B_50D", "GLOVE_840B_300D"):
        monkeypatch.setenv(name, f"/glove/{name}.txt")
    profile, _ = load_profile("paper")
    run_knobs = spec.run_knobs(profile, task, {}, "test")
    assert run_knobs["GLOVE_PATH"] == f"/glove/{variable}.txt" and run_knobs["SIZE"] == "paper"
    knobs(**{name: value for name, value in run_knobs.items() if name in ("GLOVE_PATH", "SIZE")})
    words = config_params(task).as_dict()["model"]["text_field_embedder"]["token_embedders"]["tokens"]
    assert (words["pretrained_file"], words["embedding_dim"]) == (f"/glove/{variable}.txt", dim)


@pytest.mark.parametrize("task", CONFIGS)
def test_elmo_layer_norm_knob_reaches_every_mix(knobs, task):
    """ELMO_LAYER_NORM (default false, as allennlp-models and document-qa) turns on the paper code's layer norm in
    every scalar mix of every task, both placements; a value other than false|true is refused."""
    vocab = sample_vocabulary(task)

    def layer_norms(**extra):
        knobs(ELMO="both", **extra)
        model = Model.from_params(vocab=vocab, params=config_params(task).pop("model"))
        return [module.do_layer_norm for module in model.modules() if type(module).__name__ == "ScalarMix"]

    assert layer_norms() == [False, False]
    assert layer_norms(ELMO_LAYER_NORM="true") == [True, True]
    from tasks.knobs import knob_problems  # the rule's one place (test_unknown_knob_value_is_refused)

    assert knob_problems({"ELMO_LAYER_NORM": "yes"}) == ["knob ELMO_LAYER_NORM = 'yes': expected false | true"]


@pytest.mark.parametrize("task", CONFIGS)
def test_batches_per_epoch_sets_the_training_epoch_and_dev_and_test_stay_whole(knobs, task):
    """BATCHES_PER_EPOCH (Figure 1's smallest training sets): the training loader's epoch has N batches, while dev
    and test are read whole (allennlp builds the validation/test loader from data_loader's settings unless given
    one, and would otherwise evaluate N batches of dev). Every config must extend data_loader, not replace it."""
    knobs()
    plain = config_params(task).as_dict()
    assert "batches_per_epoch" not in plain["data_loader"] and "validation_data_loader" not in plain
    knobs(BATCHES_PER_EPOCH="7")
    config = config_params(task).as_dict()
    assert config["data_loader"] == {**plain["data_loader"], "batches_per_epoch": 7}
    assert config["validation_data_loader"] == plain["data_loader"]


@pytest.mark.slow
def test_batches_per_epoch_trains_that_many_batches_per_epoch(tmp_path):
    """A real `allennlp train` (tiny SNLI: 9 training pairs, 3 batches of at most 4; 4 dev pairs, 1 batch): with
    BATCHES_PER_EPOCH=5 each training epoch runs 5 batches, cycling through the data; dev is still one batch."""
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "SIZE": "tiny", "NUM_EPOCHS": "2", "BATCHES_PER_EPOCH": "5", "PYTHONPATH": child_pythonpath(),
           "ALLENNLP_CACHE_ROOT": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "allennlp", "train", "jsonnet_configs/snli.jsonnet", "-s",
                           str(tmp_path / "m"), "--include-package", "tasks"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    bars = re.findall(r"(\d+)/(\d+) \[", (tmp_path / "m" / "out.log").read_text())  # tqdm: done/total [
    assert {total for _, total in bars} == {"5", "1"}  # training 5 (not 3), dev 1
    assert ("5", "5") in bars and ("1", "1") in bars


def test_every_moving_average_in_the_configs_survives_a_resume(knobs):
    """allennlp's 'exponential' average stops following the model after `allennlp train --recover`, which the runner
    uses to go on with a run cut off by the end of a session (tasks/squad/moving_average.py)."""
    knobs()
    averages = {task: config_params(task).as_dict()["trainer"].get("moving_average")
                for task in ("squad", "snli", "srl", "coref", "ner", "sst")}
    assert averages["squad"] == {"type": "exponential_resumable", "decay": 0.999}
    assert all(a is None or a["type"] == "exponential_resumable" for a in averages.values())

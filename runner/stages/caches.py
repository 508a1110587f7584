"""Build (or find) the frozen-biLM activation cache of one task's data (see elmo_module/activation_cache.py).

The sentences are whatever the task's own dataset readers give to the ELMo indexer, so the runner needs no task
knowledge: it reads the config with the run's knobs, builds its readers and reads train, dev and test.
"""
import hashlib
import json
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from runner.paths import REPO
from runner.task_configs import elmo_embedder

ELMO_KEY = "elmo_module"  # the token-indexer key of jsonnet_configs/elmo.libsonnet


def _texts(field) -> Iterator[List[str]]:
    from allennlp.data.fields import ListField, TextField

    if isinstance(field, TextField) and ELMO_KEY in field.token_indexers:
        if getattr(field.token_indexers[ELMO_KEY], "sentences", False):  # the biLM sees each sentence alone
            from elmo_module.allennlp_adapter import sentence_runs  # (torch/allennlp behind it: loaded when this runs)

            for start, length in sentence_runs([t.type_id for t in field.tokens]):
                yield [t.text for t in field.tokens[start:start + length]]
        else:
            yield [t.text for t in field.tokens]
    elif isinstance(field, ListField):
        for f in field.field_list:
            yield from _texts(f)


def task_params(task: str, knobs: Dict[str, str]) -> dict:
    """The task config with the run's knobs, ELMo on (so the readers index for it), full training set, seed 1: the
    seed only picks a training subsample (none here) or coref's random windows (the cache reads whole documents:
    read_sentences), so every seed's runs share one cache (the key followed the first run's seed before
    2026-11-27)."""
    from allennlp.common import Params
    from allennlp.common.util import import_module_and_submodules

    for package in ("tasks", "elmo_module.allennlp_adapter"):  # what `allennlp train --include-package` imports
        import_module_and_submodules(package)
    env = {**knobs, "ELMO": "input", "TRAIN_FRACTION": "1.0", "ELMO_CACHE": "", "SEED": "1"}
    return Params.from_file(str(REPO / "jsonnet_configs" / f"{task}.jsonnet"), ext_vars=env).as_dict()


SPLIT_KEYS = {"TRAIN_PATH": "train_data_path", "DEV_PATH": "validation_data_path", "TEST_PATH": "test_data_path"}


def _readers(params: dict) -> Tuple[object, object]:
    """(the training reader, the dev/test reader) of a task config."""
    from allennlp.common import Params
    from allennlp.data import DatasetReader

    reader = DatasetReader.from_params(Params(params["dataset_reader"]))
    validation = params.get("validation_dataset_reader")
    return reader, (DatasetReader.from_params(Params(validation)) if validation else reader)


def task_readers(task: str, knobs: Dict[str, str]) -> Tuple[object, object, str]:
    """(training reader, dev/test reader, the training reader's registered type) of a task as the activation cache reads
    its data: the config with the run's knobs, ELMo indexer on, full training set (runner/preflight/checks.py reads the
    first records of every data file through them)."""
    params = task_params(task, knobs)
    reader_type = params["dataset_reader"].get("type")  # (from_params pops it)
    return (*_readers(params), reader_type)


def instance_texts(instance) -> List[List[str]]:
    """The token lists of an instance that the ELMo indexer sees: what the activation cache stores."""
    return [text for field in instance.fields.values() for text in _texts(field)]


def _random_windows(params: dict) -> Optional[str]:
    """How the training reader's random windows (coref at SIZE=paper: a run of 50 sentences of each document from a
    random start, drawn anew each epoch; e2e-coref coref_model.py:122-132) meet the cache: None without them;
    "sentences" when the biLM sees each sentence alone, so that every window is made of sentences the cache holds if
    it reads the whole training documents; "texts" when each window is a new text for the biLM (no cache)."""
    reader = params["dataset_reader"]
    if not reader.get("random_offset"):
        return None
    return "sentences" if (reader.get("token_indexers") or {}).get(ELMO_KEY, {}).get("sentences") else "texts"


def read_sentences(params: dict, config_keys: List[str]) -> List[List[str]]:
    """Every text the ELMo indexer sees, read as an ELMo run reads it (train with the training reader; with random
    windows of sentences, every sentence of the whole training documents, read with the dev/test reader)."""
    reader, validation_reader = _readers(params)
    if _random_windows(params) == "sentences":
        reader = validation_reader
    sentences = []
    for key in config_keys:
        for instance in (reader if key == "train_data_path" else validation_reader).read(params[key]):
            sentences.extend(instance_texts(instance))
    return sentences


def read_task_sentences(task: str, knobs: Dict[str, str], splits: List[str]) -> List[List[str]]:
    """The sentences of the given splits (TRAIN_PATH, DEV_PATH, TEST_PATH) of a task's data."""
    params = task_params(task, knobs)
    return read_sentences(params, [SPLIT_KEYS[s] for s in splits if params.get(SPLIT_KEYS[s])])


def no_cache_reason(task: str, knobs: Dict[str, str]) -> Optional[str]:
    """Why a task's runs cannot read an activation cache, or None. A cache holds the biLM's layers of the texts read
    once before training; a training reader that draws a new window of each document each epoch, with the biLM
    over the whole window, would miss them from its second epoch (_random_windows)."""
    if knobs.get("ENCODER", "elmo").startswith("hf:"):
        return (f"{task}: no activation cache for a hub encoder ({knobs['ENCODER']}: its files are transformers' "
                f"cache, which the runner does not checksum): it runs inside each run")
    if _random_windows(task_params(task, knobs)) == "texts":
        return (f"{task}: no activation cache (its training reader draws a random window of each document every "
                f"epoch, random_offset, and the encoder reads each window whole): it runs inside each run")
    return None


def ensure_cache(task: str, knobs: Dict[str, str], cache_root: Path, dtype: str = "float16",
                 device: str = "cpu") -> Path:
    """The cache of a task's texts (every split, the full training set) for the run's biLM or transformer: found, or
    built (a cache of other weights, pooling or precision is another directory)."""
    from elmo_module.activation_cache import (  # (torch/allennlp behind it: loaded when this runs)
        build_cache,
        cache_problem,
        file_checksum,
    )

    # every sentence of the full data (no training subsample), read as an ELMo run reads it
    params = task_params(task, knobs)
    keys = [k for k in SPLIT_KEYS.values() if params.get(k)]
    paths = [params[k] for k in keys]
    encoder = knobs.get("ENCODER", "elmo")
    if encoder == "elmo":
        options = _embedder_files(params)
        weights_sum = file_checksum(*options)
    else:
        from elmo_module.transformer_cache import encoder_identity  # (torch behind it: loaded when this runs)

        weights_sum = encoder_identity(encoder, knobs.get("ENCODER_POOLING", "first"))
    data_sum = file_checksum(*[REPO / p for p in paths])
    identity = json.dumps([data_sum, params["dataset_reader"], params.get("validation_dataset_reader")],
                          sort_keys=True)
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    precision = knobs.get("ELMO_PRECISION", "float32")  # of the encoder's forward: bfloat16's layers are another cache
    suffix = ("" if dtype == "float16" else f"-{dtype}") + ("" if precision == "float32" else f"-{precision}")
    directory = cache_root / weights_sum[:16] / f"{task}-{key}{suffix}"
    problem = cache_problem(directory, weights_sum, precision)
    if problem is None:
        return directory
    if (directory / "meta.json").is_file():  # an older format: rebuilt, never read
        print(f"{problem}\n  -> rebuilding it", flush=True)
    sentences = read_sentences(params, keys)
    data = {"files": paths, "sha256": data_sum}
    # reuse: another runner (or a test) building the same cache at the same time holds its lock; this one waits and
    # takes the finished cache (elmo_module/activation_cache.py, "Concurrency")
    if encoder != "elmo":
        return _transformer_cache(encoder, knobs.get("ENCODER_POOLING", "first"), sentences, directory, data, dtype,
                                  precision, device)
    from elmo_module.weights import load_bilm  # (torch/allennlp behind it: loaded when this runs)

    bilm = load_bilm(*options, stateful=False, precision=precision).to(device)
    return build_cache(bilm, sentences, directory, weights_sum, data=data, reuse=True, dtype=dtype)


def _transformer_cache(encoder: str, pooling: str, texts, directory: Path, data: dict, dtype: str, precision: str,
                       device: str) -> Path:
    """A transformer's cache: its texts indexed as the runs' indexer does (word pieces and each word's offsets)."""
    from allennlp.data import Token, Vocabulary

    from elmo_module.allennlp_adapter import TransformerPiecesIndexer  # (allennlp, torch behind these three:
    from elmo_module.transformer import FrozenTransformer  # loaded when a transformer's cache is built,
    from elmo_module.transformer_cache import build_transformer_cache  # as ELMo's are in ensure_cache)

    indexer, vocabulary = TransformerPiecesIndexer(encoder), Vocabulary()
    return build_transformer_cache(
        FrozenTransformer(encoder, pooling).to(device),
        lambda words: indexer.tokens_to_indices([Token(w) for w in words], vocabulary), texts, directory,
        data=data, reuse=True, dtype=dtype, precision=precision)


def _embedder_files(params: dict):
    """(options_file, weight_file) of the elmo_module embedder."""
    embedder = elmo_embedder(params["model"])
    if embedder is None:
        raise ValueError("no 'elmo_module' token embedder in the task config")
    return REPO / embedder["options_file"], REPO / embedder["weight_file"]

"""One evaluation per split: the number a run records for dev (at its kept epoch) and test is the metric of its
archived per-example predictions, the same numbers every table shows and every test resamples.

The predictions pass (tasks/predictions.py) runs the kept epoch's model once over the dev and once over the test file,
in file order, in batches of the run's own evaluation batch size (``tasks.predictions.evaluation_batch_size``: one
document for coref). allennlp's own evaluation batches by length, with padding
noise; for most models the two agree to 1e-11, but ELMo with the paper code's layer norm (elmo_module/scalar_mix.py:
one mean and variance over the whole batch, as bilm-tf's ``weight_layers``) gives each sentence outputs that depend
on its batch, and the two evaluations then differ (up to 0.29 accuracy points on the small SNLI runs). The number of
record is the predictions' own, with allennlp's kept beside it as ``reported`` in result.json, and the batching of the
pass recorded (``predictions.batching``, the batch size the pass wrote in its file), so the table, the seed test and
the bootstrap of a claim all read one evaluation. The predictions file's sha256 is recorded too: predictions swapped
between runs are refused when tables are built (``check_run``), not averaged in.
"""
import gzip
import hashlib
import json
from pathlib import Path
from typing import Optional, Tuple

from runner.metrics import in_units_of, percent, split_metric

PREDICTIONS = "predictions.json.gz"  # per-example dev/test predictions beside result.json (tasks/predictions.py)
EXACT = 1e-6  # metric points (%): the recorded number and the predictions' metric are one number (float rounding)
SCREENED = 0.01  # points: a model whose outputs do not depend on the batch: its two evaluations agree this closely
# points: a batch-dependent model's two evaluations differ by its batching, not more than this (the small SNLI runs:
# up to 0.29); beyond it the predictions are refused as not the model's (e.g. a stateful biLM), not made the record
BATCHING_SCREEN = 1.0


def batching(data: dict, run_dir: Path) -> dict:
    """The batching of the pass that wrote ``data``: the batch size it recorded in its file, else (a file written
    before it did) the run's own evaluation batch size from its config.json (tasks/predictions.py
    evaluation_batch_size: coref evaluates one document per batch), else None: unknown, not guessed."""
    size = data.get("batch_size")
    config = Path(run_dir) / "model" / "config.json"
    if size is None and config.is_file():
        from tasks.predictions import evaluation_batch_size  # (torch/allennlp behind it: loaded when this runs)

        size = evaluation_batch_size(json.loads(config.read_text()))
    return {"order": "file", "batch_size": size, "by": "tasks/predictions.py (the kept epoch's model, once per split)"}


def read_predictions(run_dir: Path) -> dict:
    return json.loads(gzip.decompress((Path(run_dir) / PREDICTIONS).read_bytes()))


def adopt(result: dict, run_dir: Path, data: Optional[dict] = None) -> Optional[dict]:
    """``result`` with the predictions' metric as its number of record for every split the predictions cover,
    allennlp's numbers kept as ``reported``, the batching and the file's sha256 recorded; None when the run has no
    kept predictions or already records them so. Before adopting, the file is checked to be the run's own: a model
    whose outputs do not depend on the batch must give back allennlp's number to SCREENED points; a batch-dependent
    one the predictions' number it recorded when it finished (``predictions.batch_dependent``, 4 decimals), when it
    recorded one. Raises ValueError naming the run otherwise."""
    record = result.get("predictions") or {}
    if "reported" in result or "problem" in record or not record.get("units"):
        return None
    path = Path(run_dir) / PREDICTIONS
    if not path.is_file():
        return None
    raw = path.read_bytes()
    data = data or json.loads(gzip.decompress(raw))
    out = dict(result, reported={split: result.get(split) for split in ("dev", "test")})
    noted = record.get("batch_dependent") or {}
    for split in record["units"]:
        ours, reported = split_metric(data, split), result.get(split)
        if not isinstance(reported, (int, float)):
            continue
        expected, tolerance = (noted[split]["predictions"], 5e-5) if split in noted else (percent(reported), SCREENED)
        if abs(ours - expected) > tolerance:
            raise ValueError(f"{path}: its {split} predictions give {ours:.4f}, the run recorded {expected:.4f}: not "
                             f"this run's predictions")
        out[split] = in_units_of(ours, reported)
    out["predictions"] = dict(record, sha256=hashlib.sha256(raw).hexdigest(), batching=batching(data, run_dir))
    return out


# The knobs that tell the runs of one cell from another's: a record showing other values is another run's record
IDENTITY_KNOBS = ("ELMO", "ELMO_MIX", "ELMO_LAMBDA", "ELMO_LAYER_NORM", "WORD_VECTORS", "TRAIN_FRACTION", "SEED",
                  "ENCODER")


def record_mismatch(result: dict, run_dir: Path, task: str, seed: int, knobs: Optional[dict] = None) -> Optional[str]:
    """Why a finished run's record is not the record of the run it is read for, in one line, or None: its run id
    (the directory's name), task, seed or identifying knobs differ from the run's (a record copied over another's)."""
    path = Path(run_dir) / "result.json"
    for key, want in (("run_id", Path(run_dir).name), ("task", task), ("seed", seed)):
        if result.get(key) is not None and result[key] != want:
            return f"{path} records {key} {result[key]!r}, expected {want!r}: the record of another run"
    recorded = result.get("knobs") if isinstance(result.get("knobs"), dict) else {}
    differ = [k for k in IDENTITY_KNOBS if knobs and k in knobs and k in recorded and str(recorded[k]) != str(knobs[k])]
    if differ:
        found = ", ".join(f"{k}={recorded[k]}" for k in differ)
        return (f"{path} records {found}, expected {', '.join(f'{k}={knobs[k]}' for k in differ)}: the record of "
                f"another run")
    return None


def check_run(result: dict, run_dir: Path) -> Tuple[Optional[str], Optional[dict]]:
    """(why the run's archived predictions are not the evidence behind its recorded numbers, in one line, or None;
    the predictions read, for the caller to use rather than read them again, or None): the file is missing or
    unreadable, its sha256 differs from the recorded one, or its metric on a split differs from the number of
    record."""
    record = result.get("predictions") or {}
    if "problem" in record or not record.get("units"):
        return None, None  # no predictions: its claims say the view over examples is missing
    path = Path(run_dir) / PREDICTIONS
    if not path.is_file():
        return f"{path} is missing, its result records predictions", None
    raw = path.read_bytes()
    if record.get("sha256") and hashlib.sha256(raw).hexdigest() != record["sha256"]:
        return f"{path} is not the predictions file this run recorded (sha256 differs)", None
    try:
        data = json.loads(gzip.decompress(raw))
        for split in record["units"]:
            recorded = result.get(split)
            if isinstance(recorded, (int, float)):
                ours = split_metric(data, split)
                tolerance = EXACT if "reported" in result else SCREENED
                if abs(ours - percent(recorded)) > tolerance:
                    return (f"{path}: its {split} predictions give {ours:.4f}, the run records "
                            f"{percent(recorded):.4f}"), None
    except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError) as e:
        return f"{path}: unreadable predictions ({type(e).__name__}: {str(e)[:120]})", None
    return None, data

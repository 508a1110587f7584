"""Per-example predictions of a finished training, kept so that significance can be computed after the fact.

The trainer callback ``unit_predictions`` runs, after training, the best epoch's model (allennlp restores it before
``on_end``) once over the dev and once over the test file, read in file order by the run's own validation reader
(``config.json`` of the serialization dir), and writes ``unit_predictions.json.gz``: per split, the units the
task's metric is computed over (pairs, sentences, questions), each with its id (position in the file: the dev and
test files are the same for every run of a profile, their checksums are recorded), the predicted and gold
label / spans / tags / answer, and the counts the metric is recomputed from (``runner/analysis/stats.py`` METRICS). The
runner (``runner/execution/training.py``) checks that the counts give back the metric allennlp reported before keeping
the file.

A model type without an extractor writes nothing; its runs report "no per-example predictions".
"""
import gzip
import json
import os
import time
from typing import Any, Dict, List, Optional

import torch
from allennlp.common import Params
from allennlp.data import Batch, DatasetReader
from allennlp.data.dataset_readers.dataset_utils import span_utils
from allennlp.nn import util as nn_util
from allennlp.training.callbacks import TrainerCallback

BATCH = 32


def _accuracy_units(model, output, instances) -> List[dict]:
    logits = output.get("label_logits", output.get("logits"))
    predicted = logits.argmax(-1).tolist()
    units = []
    for p, instance in zip(predicted, instances):
        pred, gold = model.vocab.get_token_from_index(p, "labels"), instance.fields["label"].label
        units.append({"pred": pred, "gold": gold, "counts": [int(pred == gold), 1]})
    return units


SPANS = {"IOB1": span_utils.iob1_tags_to_spans, "BIO": span_utils.bio_tags_to_spans,
         "BIOUL": span_utils.bioul_tags_to_spans}


def _span_units(model, output, instances) -> List[dict]:
    """conlleval's counts per sentence: spans as (label, start, end), as allennlp's SpanBasedF1Measure compares."""
    to_spans = SPANS[model.label_encoding]
    units = []
    for tags, instance in zip(output["tags"], instances):
        pred_tags = [model.vocab.get_token_from_index(t, "labels") for t in tags]
        gold_tags = list(instance.fields["tags"].labels)
        pred = {(label, start, end) for label, (start, end) in to_spans(pred_tags)}
        gold = {(label, start, end) for label, (start, end) in to_spans(gold_tags)}
        units.append({"pred": sorted(pred), "gold": sorted(gold),
                      "counts": [len(pred & gold), len(pred - gold), len(gold - pred)]})
    return units


def _squad_units(model, output, instances) -> List[dict]:
    from tasks.squad.squad_v11_eval import f1_score, max_over_ground_truths

    units = []
    for answer, instance in zip(output["best_span_str"], instances):
        gold = instance.fields["metadata"].metadata["answer_texts"]
        units.append({"id": instance.fields["metadata"].metadata.get("id"), "pred": answer, "gold": gold,
                      "counts": [max_over_ground_truths(f1_score, answer, gold), 1]})
    return units


def srl_eval_counts(pred_tags: List[str], gold_tags: List[str], verb: Optional[str]) -> List[int]:
    """srl-eval.pl's [correct, excess, missed] arguments of one predicate as allennlp-models' SrlEvalScorer gets it:
    the BIO tags converted by ``convert_bio_tags_to_conll_format``, and ``verb`` (the word at the verb index, None
    without one) in the target column (``write_conll_formatted_tags_to_file``). "l." = line of the srl-eval.pl
    bundled with allennlp-models 2.10.1 (allennlp_models/structured_prediction/tools/srl-eval.pl)."""
    from allennlp_models.structured_prediction.models.srl import convert_bio_tags_to_conll_format

    # a proposition only where the target column is not "-" (l. 681-682), and only gold propositions are scored
    # (l. 93-118): a sentence without predicate (all "-") counts nothing, whatever is predicted
    if verb is None or verb == "-":
        return [0, 0, 0]

    def arguments(tags) -> Dict[tuple, tuple]:
        """{(start, end): (type, set of its phrases)}: an argument is keyed by its span (l. 1090-1091)."""
        phrases, start = [], None  # Start-End phrases, in order of start (l. 1341-1379; phrases(), l. 1504-1526)
        for i, cell in enumerate(convert_bio_tags_to_conll_format(tags)):  # never nested: "(X*", "*", "*)", "(X*)"
            if cell.startswith("("):
                start, label = i, cell[1:cell.index("*")]
            if cell.endswith(")"):
                phrases.append((label, start, i))
        args, latest = {}, {}  # latest: the span of the last argument of each type (%ARGS, l. 1029)
        for label, start, end in phrases:
            head = latest.get(label[2:]) if label.startswith("C-") else None
            if head is not None:  # C-X continues the last X: one argument from X's start to here (l. 1036-1048)
                _, pieces = args.pop(head)
                span, label = (head[0], end), label[2:]
                args[span] = (label, pieces | {(start, end)})
            else:  # a C-X without an X before it is a plain X (l. 1049-1056); any other label an argument (l. 1058)
                span, label = (start, end), label[2:] if label.startswith("C-") else label
                args[span] = (label, {(start, end)})
            latest[label] = span
        return args

    # discriminate_args (l. 1074-1152): a predicted argument is correct if a gold one has its span, its type and (a
    # discontinuous one) the same phrases, a single phrase matching only a single phrase (l. 1098-1141); else it is
    # excess. Unmatched gold arguments are missed (l. 1144-1149). V is excluded from all counts (l. 54, 287-311).
    gold, counts = arguments(gold_tags), [0, 0, 0]
    for span, argument in arguments(pred_tags).items():
        correct = gold.get(span) == argument
        if correct:
            del gold[span]
        if argument[0] != "V":
            counts[0 if correct else 1] += 1
    counts[2] = sum(label != "V" for label, _ in gold.values())
    return counts


def _srl_units(model, output, instances) -> List[dict]:
    """Per predicate, srl-eval.pl's counts (``srl_eval_counts``) of the tags the model's SrlEvalScorer sees: the
    predicted tags of the model's BIO-constrained Viterbi decoding and the gold tags, and the verb word (None for a
    sentence without predicate), all kept so that the counts can be recomputed from the file."""
    tags = model.make_output_human_readable(output)["tags"]
    units = []
    for pred_tags, instance in zip(tags, instances):
        metadata = instance.fields["metadata"].metadata
        verb = None if metadata["verb_index"] is None else metadata["words"][metadata["verb_index"]]
        gold_tags = list(metadata["gold_tags"])
        units.append({"pred": list(pred_tags), "gold": gold_tags, "verb": verb,
                      "counts": srl_eval_counts(pred_tags, gold_tags, verb)})
    return units


def _coref_units(model, output, instances) -> List[dict]:
    """Per document, the MUC, B3 and CEAF-e precision and recall numerators and denominators of ``coref_f1``'s view
    (gold singletons dropped, tasks/coref/metric.py), from a fresh copy of the model's metric fed that document alone
    (the corpus score sums them over documents). The predicted and all gold clusters (singletons included) are kept,
    so that the with-singletons view can be recomputed from the file."""
    from tasks.coref.metric import CorefScores

    units = []
    for i, instance in enumerate(instances):
        scores = CorefScores(allow_singletons=model._conll_coref_scores.allow_singletons)
        metadata = instance.fields["metadata"].metadata
        top_spans, antecedents, predicted = (output[key][i].detach().cpu() for key in
                                             ("top_spans", "antecedent_indices", "predicted_antecedents"))
        scores(top_spans[None], antecedents[None], predicted[None], [metadata])
        counts = [c for scorer in scores.scorers for c in (scorer.precision_numerator, scorer.precision_denominator,
                                                           scorer.recall_numerator, scorer.recall_denominator)]
        clusters, _ = scores.get_predicted_clusters(top_spans, antecedents, predicted, scores.allow_singletons)
        units.append({"pred": [list(map(list, c)) for c in clusters],
                      "gold": [list(map(list, c)) for c in metadata["clusters"]],
                      "counts": [float(c) for c in counts]})
    return units


# model type (config.json) -> (the metric of runner/analysis/stats.py METRICS the units' counts give, extractor)
EXTRACTORS = {"esim_sized": ("accuracy", _accuracy_units), "esim": ("accuracy", _accuracy_units),
              "bcn_sized": ("accuracy", _accuracy_units), "bcn": ("accuracy", _accuracy_units),
              "crf_tagger": ("span_f1", _span_units), "bidaf_self_attention": ("mean", _squad_units),
              "srl": ("span_f1", _srl_units), "coref_sized": ("conll_coref", _coref_units),
              "coref": ("conll_coref", _coref_units)}


def evaluation_batch_size(config: dict) -> int:
    """The run's own evaluation batch size (its validation data loader's, else its data loader's, else BATCH). Some
    outputs depend on the batch: the coreference model keeps floor(spans_per_word x padded length) spans
    (allennlp-models coref.py:183,212), so a document batched with a longer one gets more candidate spans and other
    clusters; it is evaluated one document per batch (jsonnet_configs/coref.jsonnet)."""
    loader = config.get("validation_data_loader") or config.get("data_loader") or {}
    size = loader.get("batch_size") or (loader.get("batch_sampler") or {}).get("batch_size")
    return int(size) if size else BATCH


def predict_units(model, reader: DatasetReader, path: str, extract, batch_size: int = BATCH) -> List[dict]:
    """The units of one file, in file order, ids = position (or the data's own id where it has one)."""
    instances = list(reader.read(path))
    device = next(model.parameters()).device
    units = []
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(instances), batch_size):
                chunk = instances[start:start + batch_size]
                batch = Batch(chunk)
                batch.index_instances(model.vocab)
                output = model(**nn_util.move_to_device(batch.as_tensor_dict(), device))
                for i, unit in enumerate(extract(model, output, chunk), start):
                    unit["id"] = str(unit.get("id") or i)
                    units.append(unit)
    finally:  # these passes must not count in the test evaluation that follows, even when one fails
        model.get_metrics(reset=True)
    return units


@TrainerCallback.register("unit_predictions")
class UnitPredictionsCallback(TrainerCallback):
    def on_end(self, trainer, metrics: Dict[str, Any] = None, epoch: int = None, is_primary: bool = True,
               **kwargs) -> None:
        if not is_primary or metrics is None:  # a failed training writes nothing
            return
        try:
            self._write(trainer.model)
        except Exception as e:  # the training itself succeeded: keep it, and say why its predictions are missing
            with open(os.path.join(self.serialization_dir, "unit_predictions.error"), "w") as f:
                f.write(f"{type(e).__name__}: {e}"[:500])

    def _write(self, model) -> None:
        config = json.loads(open(os.path.join(self.serialization_dir, "config.json")).read())
        metric, extract = EXTRACTORS.get(config["model"]["type"], (None, None))
        if extract is None:
            return
        started = time.time()
        reader = DatasetReader.from_params(Params(config.get("validation_dataset_reader") or config["dataset_reader"]))
        splits, batch_size = {}, evaluation_batch_size(config)
        for split, key in (("dev", "validation_data_path"), ("test", "test_data_path")):
            if config.get(key):
                units = predict_units(model, reader, config[key], extract, batch_size)
                splits[split] = {"ids": [u["id"] for u in units], "counts": [u["counts"] for u in units],
                                 "pred": [u["pred"] for u in units], "gold": [u["gold"] for u in units]}
                if units and "verb" in units[0]:  # SRL: the word srl-eval.pl sees as the target (_srl_units)
                    splits[split]["verb"] = [u["verb"] for u in units]
        path = os.path.join(self.serialization_dir, "unit_predictions.json.gz")
        with gzip.open(path + ".partial", "wt") as f:
            json.dump({"format": 1, "metric": metric, "splits": splits, "seconds": round(time.time() - started, 2),
                       "batch_size": batch_size}, f)  # the pass's own batching (runner/execution/evidence.py batching)
        os.replace(path + ".partial", path)

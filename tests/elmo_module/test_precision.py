"""bfloat16 biLM inference and mixed-precision training, against float32 references.

Inference is checked against allennlp's float32 ``_ElmoBiLm`` on the random official-layout weights of
``test_bilm_reference`` (an independent implementation): bfloat16 keeps 8 significant bits, so its layers may differ
by up to ``BF16_ATOL`` (the LSTM outputs are clipped to [-3, 3]; observed ~0.015) with a mean cosine similarity of at
least ``BF16_COSINE`` per token vector (observed 0.99998); and they must differ by more than float32 rounding, or the
precision was silently ignored.
"""
import json

import pytest
import torch
from allennlp.modules.elmo import _ElmoBiLm
from allennlp.nn.util import remove_sentence_boundaries
from torch.utils._python_dispatch import TorchDispatchMode

from elmo_module import ElmoInputError, batch_to_ids, load_bilm, lstm
from elmo_module.activation_cache import ActivationCache, build_cache, file_checksum
from elmo_module.options import BiLmOptions
from elmo_module.pretraining.corpus import build_vocabulary, read_corpus, tokenize_simple
from elmo_module.pretraining.language_model import new_language_model
from elmo_module.pretraining.trainer import LmText, LmTrainer, TrainingSettings
from tests.elmo_fixtures import SENTENCES, write_random_elmo
from tests.elmo_module.test_pretrain import TINY_OPTIONS, grammar_lines

BF16_ATOL, BF16_COSINE = 0.05, 0.9995
BATCHES = [SENTENCES[:3], SENTENCES[3:7], SENTENCES[1:2], SENTENCES]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class DtypesSeen(TorchDispatchMode):
    """Every floating dtype an op produced while active."""

    def __init__(self):
        super().__init__()
        self.dtypes = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self.dtypes.add(t.dtype)
        return out


def allennlp_layers(options, weights, batches, stateful):
    theirs = _ElmoBiLm(str(options), str(weights))
    result = []
    for batch in batches:
        if not stateful:
            theirs._elmo_lstm.reset_states()
        with torch.no_grad():
            ref = theirs(batch_to_ids(batch))
        result.append([remove_sentence_boundaries(a, ref["mask"])[0] for a in ref["activations"]])
    return result


def assert_bfloat16_close(mine, expected, mask):
    assert mine.dtype == torch.float32
    difference = float((mine - expected).abs().max())
    cosine = torch.nn.functional.cosine_similarity(mine[mask], expected[mask], dim=-1)
    assert 1e-4 < difference < BF16_ATOL, difference
    assert float(cosine.mean()) > BF16_COSINE, float(cosine.mean())


@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "autocast"])
@pytest.mark.parametrize("stateful", [True, False], ids=["stateful", "stateless"])
def test_bfloat16_layers_are_close_to_allennlp_float32(tmp_path, stateful, onednn, monkeypatch):
    """Both bfloat16 paths: oneDNN's prepacked bfloat16 steps (CPU inference) and autocast's GEMMs on the
    feature-major path (what a GPU and training run; here with oneDNN turned off)."""
    monkeypatch.setattr(lstm, "USE_ONEDNN", onednn)
    options, weights = write_random_elmo(tmp_path, filters=((1, 8), (2, 8), (3, 16)), cell_dim=64, projection_dim=16)
    ours = load_bilm(options, weights, stateful=stateful, precision="bfloat16")
    for batch, expected in zip(BATCHES, allennlp_layers(options, weights, BATCHES, stateful)):
        with torch.no_grad():
            out = ours(batch_to_ids(batch))
        for mine, reference in zip(out.layers, expected):
            assert_bfloat16_close(mine, reference, out.mask)


def test_float32_default_runs_no_bfloat16_op_and_bfloat16_does(tmp_path):
    """The float32 default stays float32 end to end (bit for bit the code before precision existed: checked by hand
    against the parent commit, see README 'Reduced precision'), and allennlp's float32 within 1e-6 as before."""
    options, weights = write_random_elmo(tmp_path)
    expected = allennlp_layers(options, weights, BATCHES[:1], stateful=False)[0]
    for precision in ("float32", "bfloat16"):
        bilm = load_bilm(options, weights, precision=precision)
        seen = DtypesSeen()
        with torch.no_grad(), seen:
            layers = bilm(batch_to_ids(BATCHES[0])).layers
        assert (torch.bfloat16 in seen.dtypes) == (precision == "bfloat16"), (precision, seen.dtypes)
        if precision == "float32":
            for mine, reference in zip(layers, expected):
                torch.testing.assert_close(mine, reference, atol=1e-6, rtol=0)


def test_the_backward_stack_runs_in_bfloat16_in_its_own_thread_too(tmp_path):
    """With 2 threads the backward stack runs in a worker thread (1 thread per op), where autocast, thread-local,
    must be entered again: the layers are then those of the 1-thread run, where both stacks run in this thread."""
    options, weights = write_random_elmo(tmp_path, cell_dim=64, projection_dim=16)
    ids = batch_to_ids(SENTENCES)
    layers = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        with torch.no_grad():
            layers[threads] = load_bilm(options, weights, precision="bfloat16")(ids).layers
    for one, two in zip(layers[1], layers[2]):
        assert torch.equal(one, two)


def test_token_cache_never_serves_one_precision_to_the_other(tmp_path):
    options, weights = write_random_elmo(tmp_path)
    bilm = load_bilm(options, weights)
    ids = batch_to_ids(SENTENCES[:3])
    with torch.no_grad():
        full = bilm(ids).layers[0]
        bilm.precision = "bfloat16"
        low = bilm(ids).layers[0]
        bilm.precision = "float32"
        again = bilm(ids).layers[0]
    assert float((full - low).abs().max()) > 1e-4
    assert torch.equal(full, again)


def test_an_unknown_precision_is_a_one_line_error(tmp_path):
    options, weights = write_random_elmo(tmp_path)
    with pytest.raises(ElmoInputError, match="precision must be one of float32, bfloat16, found 'float16'"):
        load_bilm(options, weights, precision="float16")


def tiny_trainer(tmp_path, precision, negatives=8):
    (tmp_path / "train.txt").write_text(grammar_lines(400, 0), encoding="utf-8")
    corpus = read_corpus([tmp_path / "train.txt"], tokenize_simple)
    vocabulary = build_vocabulary(corpus, 100, 1)
    options = BiLmOptions.from_dict(TINY_OPTIONS)
    options.n_characters = 262
    model = new_language_model(options, len(vocabulary), 0.1, seed=0)
    settings = TrainingSettings(batch_size=8, unroll=10, negatives=negatives, seed=3, precision=precision)
    return LmTrainer(model, vocabulary, LmText(corpus, vocabulary, options.max_chars), settings)


@pytest.mark.slow
def test_mixed_precision_training_lowers_the_loss_as_float32_does_and_keeps_float32_weights(tmp_path):
    curves = {}
    for precision in ("float32", "bfloat16"):
        (tmp_path / precision).mkdir()
        trainer = tiny_trainer(tmp_path / precision, precision, negatives=1000)  # the full softmax: the true loss
        losses, seen = [], DtypesSeen()
        with seen:
            trainer.run(lambda t: t.step >= 200, after_step=lambda t, loss: losses.append(loss))  # noqa: B023 (runs now)
        assert (torch.bfloat16 in seen.dtypes) == (precision == "bfloat16")  # the GEMMs ran in bfloat16
        curves[precision] = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    first, last = curves["bfloat16"]
    assert last < 0.6 * first, curves  # observed 3.16 -> 1.2 in both
    assert abs(last - curves["float32"][1]) < 0.2 * curves["float32"][1], curves
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert all(v.dtype == torch.float32 for s in trainer.optimizer.state.values() for v in s.values()
               if torch.is_tensor(v) and v.is_floating_point())
    assert all(s.dtype == torch.float32 for s in trainer.state)


def test_a_mixed_precision_step_follows_the_float32_step(tmp_path):
    """Same weights, data and random streams: the first loss and the updated weights agree to bfloat16's accuracy."""
    full, low = tiny_trainer(tmp_path, "float32"), tiny_trainer(tmp_path, "bfloat16")
    _, f_in, f_next, b_in, b_next = next(full.train_text.window_pairs(full.train_text.corpus.ids, 8, 10))
    losses = []
    for trainer in (full, low):
        torch.manual_seed(5)
        losses.append(trainer.train_step(f_in, f_next, b_in, b_next))
    assert abs(losses[0] - losses[1]) < 0.02 * losses[0] and losses[0] != losses[1]
    for a, b in zip(full.model.parameters(), low.model.parameters()):
        torch.testing.assert_close(a, b, atol=0.01, rtol=0.01)


def test_activation_cache_is_read_only_in_the_precision_it_was_built_in(tmp_path):
    options, weights = write_random_elmo(tmp_path)
    checksum = file_checksum(options, weights)
    sentences = [s for batch in BATCHES for s in batch]
    directories = {}
    for precision in ("float32", "bfloat16"):
        directories[precision] = build_cache(load_bilm(options, weights, precision=precision), sentences,
                                             tmp_path / precision, checksum, progress=False, dtype="float32")
        assert json.loads((directories[precision] / "meta.json").read_text())["precision"] == precision
    for built, other in (("float32", "bfloat16"), ("bfloat16", "float32")):
        with pytest.raises(ElmoInputError, match=f"computed in {built}, this run asks for {other}"):
            ActivationCache(directories[built], checksum, other)
    ids = batch_to_ids(SENTENCES[:3])
    full = ActivationCache(directories["float32"], checksum).lookup(ids)[0]
    low = ActivationCache(directories["bfloat16"], checksum, "bfloat16").lookup(ids)[0]
    with torch.no_grad():
        expected = load_bilm(options, weights, precision="bfloat16")(ids).layers
    for cached, computed, reference in zip(low, expected, full):
        torch.testing.assert_close(cached, computed, atol=0, rtol=0)  # a float32-dtype cache stores them exactly
        assert float((cached - reference).abs().max()) > 1e-4


def test_cache_key_and_run_identity_follow_the_precision_knob():
    from runner.spec import Run
    from tasks.knobs import KNOBS, knob_problems

    default = Run("ner", tuple(sorted(KNOBS.items())))
    low = Run("ner", tuple(sorted({**KNOBS, "ELMO_PRECISION": "bfloat16"}.items())))
    assert default.cache_key != low.cache_key and default.run_id != low.run_id
    without = Run("ner", tuple(sorted((k, v) for k, v in KNOBS.items() if k != "ELMO_PRECISION")))
    assert default.run_id == without.run_id  # runs archived before the knob keep their identity
    assert knob_problems({"ELMO_PRECISION": "float16"}) == [
        "knob ELMO_PRECISION = 'float16': expected float32 | bfloat16"]


def test_embed_in_bfloat16_writes_float32_vectors_close_to_float32s(tmp_path, capsys):
    import h5py

    from elmo_module.__main__ import main

    options, weights = write_random_elmo(tmp_path)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    for precision in ("float32", "bfloat16"):
        assert main(["embed", "--options", str(options), "--weights", str(weights), "--input", str(source),
                     "--output", str(tmp_path / f"{precision}.hdf5"), "--precision", precision]) == 0
    assert capsys.readouterr().out.count(", bfloat16") == 1  # the device line says so
    with h5py.File(tmp_path / "float32.hdf5") as full, h5py.File(tmp_path / "bfloat16.hdf5") as low:
        for k in range(len(SENTENCES)):
            a, b = torch.from_numpy(full[str(k)][...]), torch.from_numpy(low[str(k)][...])
            assert b.dtype == torch.float32 and 1e-4 < float((a - b).abs().max()) < BF16_ATOL


def test_the_pretraining_check_goes_on_past_one_pass_over_its_training_text(tmp_path):
    """tools/precision_pretrain_check.py: --tokens beyond one pass over --train starts the next epoch as
    LmTrainer.run does (the 5M-token check on a 3M-token text stopped with StopIteration at the first pass's end)."""
    from tests.elmo_module.test_pretrain import write_corpus
    from tools.precision_pretrain_check import main as check

    data = write_corpus(tmp_path)  # 800 lines of ~7 tokens: 2 windows of 128 x 20 per pass
    out = tmp_path / "check.json"
    check(["--options", str(data / "options.json"), "--train", str(data / "train.txt"), "--heldout",
           str(data / "heldout.txt"), "--heldout-tokens", "500", "--vocab-size", "100", "--negatives", "16",
           "--tokens", str(5 * 128 * 20), "--eval-every", "5", "--out", str(out)])
    report = json.loads(out.read_text())
    last = report["evaluations"][-1]
    assert last["step"] == 5 and last["tokens"] > 4 * 128 * 20  # two passes and a half (a pass's last window is short)
    assert all(0 < last[p]["heldout"] < report["evaluations"][0][p]["heldout"] for p in ("float32", "bfloat16"))


@pytest.mark.slow
def test_the_pretraining_check_resumes_from_its_checkpoint_to_the_figures_of_a_run_without_a_stop(tmp_path):
    """tools/precision_pretrain_check.py --checkpoint: a check stopped after its first evaluation and run again with a
    larger --tokens goes on where it stopped (both trainers' weights, optimizer, data position and random streams) and
    ends with exactly the held-out perplexities of one uninterrupted run; a checkpoint of other settings is refused."""
    from tests.elmo_module.test_pretrain import write_corpus
    from tools.precision_pretrain_check import main as check

    data = write_corpus(tmp_path)
    common = ["--options", str(data / "options.json"), "--train", str(data / "train.txt"), "--heldout",
              str(data / "heldout.txt"), "--heldout-tokens", "500", "--vocab-size", "100", "--negatives", "16",
              "--eval-every", "2"]
    whole, part, saved = tmp_path / "whole.json", tmp_path / "part.json", tmp_path / "check.pt"
    check(common + ["--tokens", str(5 * 128 * 20), "--out", str(whole)])
    check(common + ["--tokens", str(2 * 128 * 20), "--out", str(part), "--checkpoint", str(saved)])
    assert [e["step"] for e in json.loads(part.read_text())["evaluations"]] == [0, 2]
    check(common + ["--tokens", str(5 * 128 * 20), "--out", str(part), "--checkpoint", str(saved)])
    resumed, uninterrupted = (json.loads(f.read_text())["evaluations"] for f in (part, whole))
    assert [e["step"] for e in resumed] == [e["step"] for e in uninterrupted] == [0, 2, 4, 5]
    for a, b in zip(resumed, uninterrupted):
        assert a["tokens"] == b["tokens"]
        assert [a[p]["heldout"] for p in ("float32", "bfloat16")] == [b[p]["heldout"] for p in ("float32", "bfloat16")]
    with pytest.raises(SystemExit, match="was made with eval_every 2, this command gives 3"):
        check(common[:-1] + ["3", "--tokens", str(6 * 128 * 20), "--out", str(part), "--checkpoint", str(saved)])


def test_the_precision_knob_leaves_the_baselines_identity_alone():
    """`--precision bfloat16` changed every baseline's run id, and the baselines (which run no biLM) trained twice with
    the same numbers; the ELMo runs' ids follow it."""
    from runner.profile import Profile
    from runner.spec import expand_cells

    sweep = {"name": "table1", "kind": "table", "split": "test", "tasks": ["ner"], "seeds": {"default": 1},
             "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}},
                         {"label": "ELMo", "knobs": {"ELMO": "input"}}]}
    profiles = {p: Profile(name="p", sweeps=("table1",), knobs={"ELMO_PRECISION": p}) for p in ("float32", "bfloat16")}
    runs = {precision: {c.column: c.run for c in expand_cells(profile, [sweep])}
            for precision, profile in profiles.items()}
    assert runs["bfloat16"]["baseline"] == runs["float32"]["baseline"]
    assert runs["bfloat16"]["baseline"].knob_dict["ELMO_PRECISION"] == "float32"
    assert runs["bfloat16"]["ELMo"].run_id != runs["float32"]["ELMo"].run_id
    assert runs["bfloat16"]["ELMo"].knob_dict["ELMO_PRECISION"] == "bfloat16"

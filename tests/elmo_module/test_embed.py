"""``python -m elmo_module embed``: layout, batching order, layers choice, bad input."""
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
import torch

from elmo_module import batch_to_ids, load_bilm
from elmo_module.__main__ import main
from runner.execution.training import child_pythonpath
from tests.elmo_fixtures import SENTENCES, write_random_elmo

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def elmo_files(tmp_path):
    return write_random_elmo(tmp_path, seed=31)


def write_lines(path, lines):
    path.write_text("".join(" ".join(s) + "\n" for s in lines), encoding="utf-8")
    return path


def test_embed_all_layers_in_file_order_with_state_carried(tmp_path, elmo_files):
    lines = SENTENCES + [[]] + SENTENCES[:2]  # an empty line in the middle
    source = write_lines(tmp_path / "in.txt", lines)
    out = tmp_path / "out.hdf5"
    assert main(["embed", "--options", str(elmo_files[0]), "--weights", str(elmo_files[1]), "--input", str(source),
                 "--output", str(out), "--batch-size", "3"]) == 0
    bilm = load_bilm(*elmo_files, stateful=True)  # the same batches, in file order, state carried row by row
    expected = {}
    with torch.no_grad():
        for start in range(0, len(lines), 3):
            batch = lines[start:start + 3]
            layers = torch.stack(bilm(batch_to_ids(batch)).layers, dim=1)
            for row, sentence in enumerate(batch):
                expected[str(start + row)] = layers[row, :, :len(sentence)].numpy()
    with h5py.File(out) as f:
        assert set(f) == set(expected) | {"sentence_to_index"}
        for key, value in expected.items():
            assert f[key].shape == value.shape
            assert (abs(f[key][...] - value) <= 1e-6).all()
        assert f[str(len(SENTENCES))].shape == (3, 0, 16)  # the empty line
        index = json.loads(f["sentence_to_index"][0])
        assert index["The cat sat ."] == str(len(SENTENCES) + 1)  # a repeated sentence maps to its last line
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("layers", ["top", "average"])
def test_embed_top_and_average(tmp_path, elmo_files, layers):
    source = write_lines(tmp_path / "in.txt", SENTENCES[:3])
    out = tmp_path / "out.hdf5"
    main(["embed", "--options", str(elmo_files[0]), "--weights", str(elmo_files[1]), "--input", str(source),
          "--output", str(out), "--layers", layers, "--stateless"])
    bilm = load_bilm(*elmo_files, stateful=False)
    with torch.no_grad():
        full = torch.stack(bilm(batch_to_ids(SENTENCES[:3])).layers, dim=1)
    with h5py.File(out) as f:
        for row, sentence in enumerate(SENTENCES[:3]):
            want = full[row, :, :len(sentence)]
            want = want[-1] if layers == "top" else want.mean(dim=0)
            torch.testing.assert_close(torch.from_numpy(f[str(row)][...]), want, atol=1e-6, rtol=0)


def run_cli(*args):
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    return subprocess.run([sys.executable, "-m", "elmo_module", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


@pytest.mark.slow
def test_invalid_utf8_line_is_a_one_line_error_and_nothing_is_written(tmp_path, elmo_files):
    source = tmp_path / "bad.txt"
    source.write_bytes(b"fine line\nanother\nbad \xff byte\n")
    out = tmp_path / "out.hdf5"
    done = run_cli("embed", "--options", str(elmo_files[0]), "--weights", str(elmo_files[1]), "--input",
                   str(source), "--output", str(out))
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {source} line 3: not valid UTF-8 (byte 0xff at column 5)"]
    assert "Traceback" not in done.stderr
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


@pytest.mark.slow
def test_bad_weight_files_are_named(tmp_path, elmo_files):
    source = write_lines(tmp_path / "in.txt", SENTENCES[:1])
    done = run_cli("embed", "--options", str(elmo_files[0]), "--weights", str(source), "--input", str(source),
                   "--output", str(tmp_path / "o.hdf5"))
    assert done.returncode == 2 and "is not a readable HDF5 file" in done.stderr and "Traceback" not in done.stderr
    done = run_cli("embed", "--options", str(tmp_path / "missing.json"), "--weights", str(elmo_files[1]),
                   "--input", str(source), "--output", str(tmp_path / "o.hdf5"))
    assert done.returncode == 2 and "missing.json' does not exist" in done.stderr


def test_interrupted_embed_leaves_no_output(tmp_path, elmo_files, monkeypatch):
    source = write_lines(tmp_path / "in.txt", SENTENCES)
    import elmo_module.embed as embed

    calls = []

    def failing_batch_to_ids(batch, max_chars):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return batch_to_ids(batch, max_chars)

    monkeypatch.setattr(embed, "batch_to_ids", failing_batch_to_ids)
    out = tmp_path / "out.hdf5"
    assert main(["embed", "--options", str(elmo_files[0]), "--weights", str(elmo_files[1]), "--input", str(source),
                 "--output", str(out), "--batch-size", "2"]) == 130
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


def test_indexer_matches_allennlp_elmo_characters():
    from allennlp.data import Token, Vocabulary
    from allennlp.data.token_indexers import ELMoTokenCharactersIndexer

    from elmo_module.allennlp_adapter import ElmoCharactersIndexer

    tokens = [Token(t) for t in SENTENCES[1] + SENTENCES[3]]
    ours = ElmoCharactersIndexer().tokens_to_indices(tokens, Vocabulary())
    theirs = ELMoTokenCharactersIndexer().tokens_to_indices(tokens, Vocabulary())
    assert ours["elmo_tokens"] == theirs["elmo_tokens"]
    padded = ElmoCharactersIndexer().as_padded_tensor_dict(ours, {"elmo_tokens": len(tokens) + 2})
    assert padded["elmo_tokens"].shape == (len(tokens) + 2, 50) and not padded["elmo_tokens"][-2:].any()


# --- where the output goes: checked before the work; a full disk leaves no output ---------------------------------

def embed_args(elmo_files, source, out):
    return ["embed", "--options", str(elmo_files[0]), "--weights", str(elmo_files[1]), "--input", str(source),
            "--output", str(out)]


def test_output_in_a_missing_directory_or_input_a_directory_fails_before_the_work(tmp_path, elmo_files, capsys):
    source = write_lines(tmp_path / "in.txt", SENTENCES)
    bad_weights = (elmo_files[0], tmp_path / "no-weights.hdf5")  # an error about these would mean work was started
    assert main(embed_args(bad_weights, source, tmp_path / "missing" / "out.hdf5")) == 2
    assert capsys.readouterr().err == (f"error: --output '{tmp_path}/missing/out.hdf5': directory "
                                       f"'{tmp_path}/missing' does not exist\n")
    assert main(embed_args(bad_weights, source, tmp_path)) == 2
    assert "is a directory; expected an hdf5 file name" in capsys.readouterr().err
    assert main(embed_args(elmo_files, tmp_path, tmp_path / "out.hdf5")) == 2
    assert capsys.readouterr().err == f"error: --input '{tmp_path}' is a directory; expected a text file, one " \
                                      f"sentence per line\n"


def in_private_mount(tmp_path, script: str):
    """Runs ``script`` (sh) where ``$MNT`` is a small tmpfs of its own (a user+mount namespace: no root needed
    outside, nothing left mounted); skips where namespaces are not allowed."""
    mount = tmp_path / "mnt"
    mount.mkdir(exist_ok=True)
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no user namespaces (unshare -rm) for a private tmpfs")
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "MNT": str(mount), "PY": sys.executable}
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


@pytest.mark.slow
def test_read_only_directory_and_full_disk_fail_before_the_work(tmp_path, elmo_files):
    source = write_lines(tmp_path / "in.txt", SENTENCES * 300)
    args = " ".join(embed_args(elmo_files, source, "$MNT/out.hdf5")[:-1])
    done = in_private_mount(tmp_path, f'mount -t tmpfs -o ro,size=1m none "$MNT" && "$PY" -m elmo_module {args} '
                                      f'"$MNT/out.hdf5"; echo "rc=$?"; ls "$MNT"')
    assert done.stdout.splitlines() == ["rc=2"], done.stderr
    assert done.stderr == (f"error: --output '{tmp_path}/mnt/out.hdf5': cannot write in '{tmp_path}/mnt' "
                           f"(Read-only file system)\n")
    done = in_private_mount(tmp_path, f'mount -t tmpfs -o size=64k none "$MNT" && "$PY" -m elmo_module {args} '
                                      f'"$MNT/out.hdf5"; echo "rc=$?"; ls "$MNT"')
    assert done.stdout.splitlines() == ["rc=2"], done.stderr
    assert done.stderr.startswith(f"error: --output '{tmp_path}/mnt/out.hdf5': needs about ")
    assert "MiB free (no output written)" in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.slow
def test_disk_that_fills_during_the_work_is_a_one_line_error_and_leaves_no_output(tmp_path, elmo_files):
    """The embed stops itself at its first batch (ELMO_PAUSE_AT), another process fills the disk, the embed goes
    on: a one-line error, exit 2, nothing left in the directory."""
    from elmo_module.embed import output_bytes
    from elmo_module.options import BiLmOptions

    source = write_lines(tmp_path / "in.txt", SENTENCES * 300)
    options = BiLmOptions.load(elmo_files[0])
    size_k = 2 * output_bytes(SENTENCES * 300, options.n_layers + 1, options.output_dim) // 1024
    args = " ".join(embed_args(elmo_files, source, "$MNT/out.hdf5")[:-1])
    done = in_private_mount(tmp_path, f"""
        mount -t tmpfs -o size={size_k}k none "$MNT" || exit 1
        ELMO_PAUSE_AT=embed-batch "$PY" -m elmo_module {args} "$MNT/out.hdf5" --batch-size 64 2>"$MNT.err" &
        pid=$!
        until grep -q "paused at embed-batch" "$MNT.err" || ! kill -0 $pid; do sleep 0.1; done
        cat /dev/zero > "$MNT/filler" 2>/dev/null   # fills the disk: ENOSPC
        kill -CONT $pid; wait $pid; echo "rc=$?"; rm "$MNT/filler"; echo "left: $(ls "$MNT")"
    """)
    device_line, *rest = done.stdout.splitlines()  # the device line comes once the input and output are checked
    assert device_line.startswith("embed: device ") and rest == ["rc=2", "left: "], done.stdout + done.stderr
    err = (tmp_path / "mnt.err").read_text()
    assert "paused at embed-batch" in err and "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"error: --output '{tmp_path}/mnt/out.hdf5': needs about ")


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_lines_end_at_lf_crlf_or_cr_as_allennlp_and_bilm_tf_read_them(tmp_path, newline):
    """A CR-only file ('a b\\rc d\\re f\\r') used to be one sentence of six words; bilm-tf and allennlp's `elmo`
    read text files with universal newlines: three sentences."""
    from elmo_module.embed import read_sentences

    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfa b" + newline + b"c d" + newline + newline + b"e f" + newline)
    assert read_sentences(path) == [["a", "b"], ["c", "d"], [], ["e", "f"]]


def test_the_allennlp_side_of_the_whole_process_comparison_does_embeds_work(tmp_path, elmo_files):
    """tools/allennlp_embed.py (the reference whole-process command of docs/speed.md) writes what embed writes: same
    datasets, same vectors from allennlp's biLM, so the two commands time the same work."""
    from tools.allennlp_embed import main as allennlp_embed

    source = write_lines(tmp_path / "in.txt", SENTENCES + SENTENCES[:2])
    ours, theirs = tmp_path / "ours.hdf5", tmp_path / "theirs.hdf5"
    common = ["--options", str(elmo_files[0]), "--weights", str(elmo_files[1]), "--input", str(source),
              "--batch-size", "3"]
    assert main(["embed", *common, "--output", str(ours)]) == 0
    assert allennlp_embed([*common, "--output", str(theirs)]) == 0
    with h5py.File(ours) as a, h5py.File(theirs) as b:
        assert set(a) == set(b)
        assert a["sentence_to_index"][0] == b["sentence_to_index"][0]
        for key in (k for k in a if k != "sentence_to_index"):
            assert a[key].shape == b[key].shape and abs(a[key][...] - b[key][...]).max() < 1e-5, key

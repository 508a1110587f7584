"""Every input of the paper profile, small, in the real formats, with a random biLM of the released shape
(2x4096_512_2048cnn_2xhighway), so that `--profile paper --check` on a GPU times the paper-size configs' arithmetic
(its GPU hours) without the official files, and a text to fine-tune it on (ROOT/text). Prints the environment as
`export NAME=value` lines.

    python tools/paper_stand_in.py /tmp/paper_inputs > /tmp/paper_env.sh && source /tmp/paper_env.sh

The data are the tasks' bundled samples (tests/runner/test_preflight.py build_stand_in), so sentence lengths are theirs,
not the official sets': the GPU hours it gives are the estimate's code path on a real GPU, not a forecast.
"""
import json
import shlex
import sys
from pathlib import Path

from tests.elmo_fixtures import write_random_elmo
from tests.runner.test_preflight import OFFICIAL, REPO, build_stand_in

# The released model's options (bilm-tf's elmo_2x4096_512_2048cnn_2xhighway_options.json;
# arXiv:1802.05365v2 Sec. 3.4, p. 4)
RELEASED = dict(filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)), n_highway=2,
                projection_dim=512, cell_dim=4096, n_layers=2, char_dim=16, n_characters=262, clip=3.0)


def write_finetune_text(root: Path) -> None:
    """ROOT/text/{train,dev}.txt: the SNLI samples' sentences, one per line, repeated (100 and 10 times) into enough
    text to time a fine-tuning epoch of the released shape."""
    (root / "text").mkdir(parents=True, exist_ok=True)
    for split, repeat in (("train", 100), ("dev", 10)):
        pairs = [json.loads(line) for line in open(REPO / "tasks" / "snli" / "sample_data" / f"{split}.jsonl")]
        lines = [" ".join(p[key].split()) for p in pairs for key in ("sentence1", "sentence2")]
        (root / "text" / f"{split}.txt").write_text("\n".join(lines * repeat) + "\n")


def main(root: Path) -> None:
    env = build_stand_in(root)
    write_finetune_text(root)
    elmo = Path(env["ELMO_DIR"])
    for name in ("options.json", "weights.hdf5"):
        (elmo / f"{OFFICIAL}_{name}").unlink()
    write_random_elmo(elmo, **RELEASED)
    for name in ("options.json", "weights.hdf5"):
        (elmo / name).rename(elmo / f"{OFFICIAL}_{name}")
    for name, value in env.items():
        print(f"export {name}={shlex.quote(value)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))

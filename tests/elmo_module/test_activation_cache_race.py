"""Two real processes build the same activation cache at once (two runners, or a runner and a test,
sharing cache/elmo): each must come back with a cache whose every sentence equals a fresh biLM pass."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_module import batch_to_ids, load_bilm
from elmo_module.activation_cache import ActivationCache, file_checksum
from runner.execution.training import child_pythonpath
from tests.elmo_fixtures import write_random_elmo

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

REPO_ROOT = Path(__file__).resolve().parents[2]
# float16 storage: relative rounding error <= 2**-11 (half an ulp of an 11-bit significand); 1e-6 absolute covers
# float32 GEMM results that differ in the last bit with the batch's row count (test_activation_cache.py)
RTOL, ATOL = 2.0 ** -11, 1e-6

BUILDER = """
import json, sys, time
import torch
from elmo_module import batch_to_ids, load_bilm
from elmo_module.activation_cache import ActivationCache, build_cache, file_checksum
from tests.elmo_module.test_activation_cache_race import mismatches
import os
from pathlib import Path
options, weights, directory, sentences, barrier = sys.argv[1:6]
sentences = json.loads(open(sentences).read())
bilm = load_bilm(options, weights, stateful=False)
checksum = file_checksum(options, weights)
(Path(barrier) / str(os.getpid())).touch()
while len(list(Path(barrier).iterdir())) < 2:  # both builders start together, once both are loaded
    time.sleep(0.01)
build_cache(bilm, sentences, directory, checksum, progress=False)
# what a runner does next: train from the cache it was handed
print(json.dumps({"mismatches": mismatches(bilm, ActivationCache(directory, checksum), sentences)}))
"""


def mismatches(bilm, cache, sentences, batch_size=16):
    """Sentences whose cached layers differ from a fresh stateless biLM pass (beyond float16 rounding)."""
    bad = 0
    for start in range(0, len(sentences), batch_size):
        ids = batch_to_ids(sentences[start:start + batch_size])
        with torch.no_grad():
            fresh = bilm(ids).layers
        got, _ = cache.lookup(ids)
        for b in range(ids.size(0)):
            if not all(torch.allclose(g[b], f[b], rtol=RTOL, atol=ATOL) for g, f in zip(got, fresh)):
                bad += 1
    return bad


def test_two_processes_building_one_cache_both_get_correct_vectors(tmp_path):
    options, weights = write_random_elmo(tmp_path, seed=5, cell_dim=64, projection_dim=16)
    rng = np.random.default_rng(0)
    words = ["w%d" % i for i in range(300)]
    sentences = [[str(w) for w in rng.choice(words, size=int(rng.integers(1, 30)))] for _ in range(600)]
    (tmp_path / "sentences.json").write_text(json.dumps(sentences))
    directory = tmp_path / "cache" / "task-key"
    (tmp_path / "barrier").mkdir()
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "OMP_NUM_THREADS": "1"}
    builders = [subprocess.Popen([sys.executable, "-c", BUILDER, str(options), str(weights), str(directory),
                                  str(tmp_path / "sentences.json"), str(tmp_path / "barrier")], cwd=REPO_ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [b.communicate(timeout=300) for b in builders]
    reports = [out.strip().splitlines()[-1] if b.returncode == 0 else f"exit {b.returncode}: {err[-600:]}"
               for b, (out, err) in zip(builders, outputs)]
    assert reports == ['{"mismatches": 0}'] * 2
    # they did overlap: one found the other building and waited for its lock
    assert sum("is being built by another process; waiting" in out for out, _ in outputs) == 1
    # and the cache left behind, read by a third process (this one)
    bilm = load_bilm(options, weights, stateful=False)
    assert mismatches(bilm, ActivationCache(directory, file_checksum(options, weights)), sentences) == 0
    assert sorted(p.name for p in directory.parent.iterdir() if not p.name.endswith(".lock")) == ["task-key"]

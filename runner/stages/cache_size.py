"""What a task's activation cache costs on disk: builds it (or finds it) for one task of a profile and prints the
tokens its readers give (repeats included), the distinct sentences and tokens stored, the bytes on disk and the
bytes per token read (docs/speed.md, "The activation cache"). ``--dtype float32`` builds the float32 variant that
page compares against.

    python -m runner.stages.cache_size --profile cache_size --task ner --cache-dir /tmp/cache \
        [--dtype float32] [--precision bfloat16]
"""
import argparse
import json
from pathlib import Path

from runner.profile import load_profile
from runner.spec import run_knobs
from runner.stages.caches import SPLIT_KEYS, ensure_cache, read_sentences, task_params


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.stages.cache_size", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    parser.add_argument("--precision", choices=["float32", "bfloat16"], help="the knob ELMO_PRECISION (default: the "
                        "profile's): the biLM's matrix products while building")
    args = parser.parse_args(argv)
    profile, _ = load_profile(args.profile)
    settings = {"ELMO_PRECISION": args.precision} if args.precision else {}
    knobs = run_knobs(profile, args.task, settings, f"profile '{profile.name}'")
    directory = ensure_cache(args.task, knobs, Path(args.cache_dir), args.dtype)
    params = task_params(args.task, knobs)
    sentences = read_sentences(params, [k for k in SPLIT_KEYS.values() if params.get(k)])
    meta = json.loads((directory / "meta.json").read_text())
    size = sum(f.stat().st_size for f in directory.iterdir())
    read = sum(len(s) for s in sentences)
    report = {"task": args.task, "directory": str(directory), "dtype": meta["dtype"],
              "precision": meta.get("precision", "float32"), "layers": meta["layers"],
              "dim": meta["dim"], "sentences_read": len(sentences), "tokens_read": read,
              "sentences_stored": meta["sentences"], "tokens_stored": meta["tokens"], "bytes": size,
              "bytes_per_token_read": round(size / read, 1), "bytes_per_token_stored": round(size / meta["tokens"], 1)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

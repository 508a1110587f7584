"""``python -m elmo_module {embed,pretrain,finetune} ...``: see docs/elmo_core.md. Bad input exits 2 with a one-line
error."""
import argparse
import importlib
import sys

from elmo_module.errors import ElmoInputError

# subcommand -> (module, help); the module has ``add_<name>_arguments(parser)`` and ``run_<name>(args)``
COMMANDS = {
    "embed": ("elmo_module.embed", "write ELMo layers of a text file to hdf5 (bilm-tf dump_bilm_embeddings layout)"),
    "pretrain": ("elmo_module.pretraining.cli", "train a biLM on raw text, write options.json + hdf5"),
    "finetune": ("elmo_module.pretraining.cli",
                 "fine-tune a biLM on a task's text, keep the epoch with the best dev perplexity"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elmo_module", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        getattr(module, f"add_{name}_arguments")(sub.add_parser(name, help=help_text))
    args = parser.parse_args(argv)
    run = getattr(importlib.import_module(COMMANDS[args.command][0]), f"run_{args.command}")
    try:
        return run(args) or 0
    except ElmoInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

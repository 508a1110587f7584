"""Writes a tiny dictionary in the WordNet 3.0 database format (``index.*``, ``data.*``; wndb(5WN)) from synsets
written for this project, so that the WSD probe's defaults and tests run without WordNet. Not WordNet's text.

``python -m probes.sample_data.make_wordnet DIR`` writes the sample (``probes/sample_data/wordnet/dict``);
tests call ``write_dict`` with their own synsets.
"""
import sys
from pathlib import Path

HEADER = "  1 Sample dictionary in the WordNet 3.0 database format, written for this project (not WordNet's data).\n"
SS_FILE = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}

# name: (ss_type, lex_filenum, [(word, lex_id)], [(pointer symbol, target name)], gloss)
SAMPLE = {
    "play.drama": ("n", 10, [("play", 0), ("drama", 1)], [], "a work written to be performed on a stage"),
    "play.move": ("n", 4, [("play", 0)], [], "a move or action in a game or sport"),
    "play.fun": ("n", 4, [("play", 1), ("fun", 0)], [], "activity done for amusement"),
    "game.n": ("n", 4, [("game", 0)], [], "a contest with rules"),
    "bank.money": ("n", 14, [("bank", 0)], [], "an institution that keeps money"),
    "bank.river": ("n", 17, [("bank", 1)], [], "the sloping land beside a river"),
    "music.n": ("n", 10, [("music", 0)], [], "sounds arranged to be heard with pleasure"),
    "play.sport": ("v", 33, [("play", 0)], [], "take part in a game or sport"),
    "play.music": ("v", 36, [("play", 0)], [], "perform music on an instrument"),
    "play.act": ("v", 36, [("play", 1), ("act", 0)], [], "perform a role on a stage"),
    "run.v": ("v", 38, [("run", 0)], [], "move fast on foot"),
    "bright.a": ("a", 0, [("bright", 0)], [], "giving off much light"),
    "brilliant.s": ("s", 0, [("brilliant", 0), ("vivid", 1)], [("&", "bright.a")], "very bright"),
    "quickly.r": ("r", 2, [("quickly", 0)], [], "with speed"),
}
# lemma and POS file -> synset names in sense-number order (first = WordNet's first sense)
SAMPLE_SENSES = {
    ("play", "noun"): ["play.drama", "play.move", "play.fun"], ("drama", "noun"): ["play.drama"],
    ("fun", "noun"): ["play.fun"], ("game", "noun"): ["game.n"], ("bank", "noun"): ["bank.river", "bank.money"],
    ("music", "noun"): ["music.n"],
    ("play", "verb"): ["play.sport", "play.music", "play.act"], ("act", "verb"): ["play.act"],
    ("run", "verb"): ["run.v"],
    ("bright", "adj"): ["bright.a"], ("brilliant", "adj"): ["brilliant.s"], ("vivid", "adj"): ["brilliant.s"],
    ("quickly", "adv"): ["quickly.r"],
}


def write_dict(directory, synsets: dict, senses: dict) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    offsets = {}
    for file_pos in ("noun", "verb", "adj", "adv"):
        names = [n for n, s in synsets.items() if SS_FILE[s[0]] == file_pos]
        position = len(HEADER)
        for name in names:  # every offset field is 8 digits wide, so a line's length does not depend on them
            offsets[name] = position
            position += len(_line(name, synsets, {n: 0 for n in synsets}).encode())
    for file_pos in ("noun", "verb", "adj", "adv"):
        names = [n for n, s in synsets.items() if SS_FILE[s[0]] == file_pos]
        (directory / f"data.{file_pos}").write_text(HEADER + "".join(_line(n, synsets, offsets) for n in names))
        lines = [f"{lemma} {file_pos[0]} {len(names_)} 0 {len(names_)} 0 "
                 + " ".join(f"{offsets[n]:08d}" for n in names_) + "  \n"
                 for (lemma, fp), names_ in sorted(senses.items()) if fp == file_pos]
        (directory / f"index.{file_pos}").write_text(HEADER + "".join(lines))


def _line(name, synsets, offsets) -> str:
    ss_type, lex_filenum, words, pointers, gloss = synsets[name]
    pos_letter = {"s": "a"}
    text = f"{offsets[name]:08d} {lex_filenum:02d} {ss_type} {len(words):02x} "
    text += "".join(f"{w} {i:x} " for w, i in words)
    text += f"{len(pointers):03d} " + "".join(
        f"{sym} {offsets[t]:08d} {pos_letter.get(synsets[t][0], synsets[t][0])} 0000 " for sym, t in pointers)
    return text + f"| {gloss}  \n"


if __name__ == "__main__":
    write_dict(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "wordnet" / "dict", SAMPLE, SAMPLE_SENSES)

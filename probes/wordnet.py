"""WordNet 3.0 sense keys and sense order from the database files (``index.*`` and ``data.*``; no ``index.sense``).

- Sense order: in ``index.<pos>`` the synset offsets of a lemma are listed in WordNet sense-number order
  (wndb(5WN), "synset_offset"), and sense numbers are assigned "based on frequency of use in semantically tagged
  corpora" (cntlist(5WN)), so the first offset is WordNet's first (most frequent) sense: the first-sense baseline and
  the fallback of Sec. 5.3. ``tests/probes/test_probes.py`` checks our numbering against every entry of the database's
  own ``cntlist.rev`` (``sense_key sense_number tag_cnt``) when the real WordNet is present.
- Sense key (senseidx(5WN)): ``lemma%ss_type:lex_filenum:lex_id:head_word:head_id`` with ss_type 1 n, 2 v, 3 a,
  4 r, 5 s (satellite); lex_filenum and lex_id two decimal digits (``data.*`` stores lex_id as one hex digit);
  head_word and head_id only for satellites: the first word of the head synset (the satellite's ``&`` pointer) and
  its lex_id. Lemmas are lower case with ``_`` for spaces; adjective markers such as ``(a)`` are dropped.
"""
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from elmo_module.errors import ElmoInputError

FILE_POS = {"NOUN": "noun", "VERB": "verb", "ADJ": "adj", "ADV": "adv"}
SS_TYPE = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}


def _word(raw: str) -> str:
    return raw.split("(")[0].lower()  # "galore(ip)" -> "galore"


def _decode(raw: bytes, where: str) -> str:
    """The database is UTF-8 (nltk's WordNet reader reads it so); another byte is one line naming where it is."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ElmoInputError(f"{where}: expected UTF-8 text, found byte 0x{raw[e.start]:02x} at column "
                             f"{e.start + 1}") from None


class WordNet:
    def __init__(self, dict_dir):
        self.dir = Path(dict_dir)
        for name in [f"{kind}.{p}" for p in FILE_POS.values() for kind in ("index", "data")]:
            if not (self.dir / name).is_file():
                raise ElmoInputError(f"{self.dir}: expected a WordNet dict folder with {name}, found none")
        self._index: Dict[str, Dict[str, List[int]]] = {}
        # (file_pos, offset) -> _read_synset's answer; per instance, as _index (an lru_cache on the method would keep
        # every WordNet alive)
        self._synsets: Dict[Tuple[str, int], Tuple[int, str, List[Tuple[str, int]], Optional[int]]] = {}

    def _offsets(self, lemma: str, pos: str) -> List[int]:
        file_pos = FILE_POS.get(pos)
        if file_pos is None:
            return []
        if file_pos not in self._index:
            self._index[file_pos] = self._read_index(self.dir / f"index.{file_pos}")
        return self._index[file_pos].get(lemma.lower().replace(" ", "_"), [])

    @staticmethod
    def _read_index(path: Path) -> Dict[str, List[int]]:
        """lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset... (wndb(5WN))."""
        index = {}
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                line = _decode(raw, f"{path}:{number}")
                if line.startswith(" "):  # the licence header
                    continue
                parts = line.split()
                try:
                    synset_cnt, p_cnt = int(parts[2]), int(parts[3])
                    offsets = [int(o) for o in parts[4 + p_cnt + 2:]]
                except (IndexError, ValueError):
                    raise ElmoInputError(f"{path}:{number}: expected 'lemma pos synset_cnt p_cnt ... offsets', "
                                         f"found {line.strip()[:80]!r}") from None
                if len(offsets) != synset_cnt:
                    raise ElmoInputError(f"{path}:{number}: expected {synset_cnt} synset offsets, found "
                                         f"{len(offsets)}")
                index[parts[0]] = offsets
        return index

    def _synset(self, file_pos: str, offset: int) -> Tuple[int, str, List[Tuple[str, int]], Optional[int]]:
        if (file_pos, offset) not in self._synsets:
            self._synsets[(file_pos, offset)] = self._read_synset(file_pos, offset)
        return self._synsets[(file_pos, offset)]

    def _read_synset(self, file_pos: str, offset: int) -> Tuple[int, str, List[Tuple[str, int]], Optional[int]]:
        """(lex_filenum, ss_type, [(word, lex_id)], offset of the head synset for satellites) of a data.* line."""
        path = self.dir / f"data.{file_pos}"
        with open(path, "rb") as f:
            f.seek(offset)
            line = _decode(f.readline(), f"{path}: byte {offset}")
        parts = line.split()
        try:
            if int(parts[0]) != offset:
                raise ValueError
            lex_filenum, ss_type, w_cnt = int(parts[1]), parts[2], int(parts[3], 16)
            words = [(_word(parts[4 + 2 * i]), int(parts[5 + 2 * i], 16)) for i in range(w_cnt)]
            at = 4 + 2 * w_cnt
            pointers = [parts[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(int(parts[at]))]
        except (IndexError, ValueError):
            raise ElmoInputError(f"{path}: byte {offset}: expected a synset line starting with that offset, found "
                                 f"{line.strip()[:80]!r}") from None
        head = next((int(p[1]) for p in pointers if p[0] == "&"), None) if ss_type == "s" else None
        return lex_filenum, ss_type, words, head

    def _key(self, lemma: str, file_pos: str, offset: int) -> str:
        lex_filenum, ss_type, words, head = self._synset(file_pos, offset)
        lex_id = next((i for w, i in words if w == lemma), None)
        if lex_id is None:
            raise ElmoInputError(f"{self.dir / ('data.' + file_pos)}: byte {offset}: expected the word {lemma!r} "
                                 f"in the synset that index.{file_pos} lists for it, found {[w for w, _ in words]}")
        head_part = ":"
        if ss_type == "s":
            if head is None:
                raise ElmoInputError(f"{self.dir / 'data.adj'}: byte {offset}: expected a '&' pointer to the head "
                                     f"synset of a satellite, found none")
            head_word, head_id = self._synset("adj", head)[2][0]
            head_part = f"{head_word}:{head_id:02d}"
        return f"{lemma}%{SS_TYPE[ss_type]}:{lex_filenum:02d}:{lex_id:02d}:{head_part}"

    def sense_keys(self, lemma: str, pos: str) -> List[str]:
        """Every sense key of (lemma, universal POS), in WordNet sense-number order (first = most frequent)."""
        lemma = lemma.lower().replace(" ", "_")
        return [self._key(lemma, FILE_POS[pos], o) for o in self._offsets(lemma, pos)]

    def first_sense(self, lemma: str, pos: str) -> Optional[str]:
        """WordNet's first sense of (lemma, POS), or None when WordNet has no such lemma with that POS."""
        lemma = lemma.lower().replace(" ", "_")
        offsets = self._offsets(lemma, pos)
        return self._key(lemma, FILE_POS[pos], offsets[0]) if offsets else None

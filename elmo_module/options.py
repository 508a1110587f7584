"""The biLM hyperparameters, read from and written to the official ``options.json`` (arXiv:1802.05365v2 Sec. 3.4,
p. 4; the options.json keys are bilm-tf's)."""
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from elmo_module.errors import ElmoInputError

# The keys the official loaders read (bilm-tf bilm/model.py, allennlp modules/elmo.py); any other key in these two
# sections is a mistake that they would ignore or refuse, never a setting.
KNOWN_KEYS = {"char_cnn": {"activation", "embedding", "filters", "max_characters_per_token", "n_characters",
                           "n_highway"},
              "lstm": {"cell_clip", "dim", "n_layers", "proj_clip", "projection_dim", "use_skip_connections"}}


def _dig(d: dict, path: str, default):
    for key in path.split("."):
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


@dataclass
class BiLmOptions:
    filters: List[Tuple[int, int]]  # (width, number) per char-CNN filter
    n_highway: int
    projection_dim: int  # token projection and LSTM projection (512 in the released model)
    cell_dim: int  # LSTM cells (4096)
    n_layers: int = 2
    char_embed_dim: int = 16
    n_characters: int = 262  # 261 (training files) or 262 (inference files); the hdf5 holds 261 rows either way
    max_chars: int = 50
    activation: str = "relu"
    cell_clip: Optional[float] = 3.0
    proj_clip: Optional[float] = 3.0
    use_skip_connections: bool = True
    # every other key of the file (bilm-tf training settings), written back unchanged
    extra: dict = field(default_factory=dict)

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of each of the three ELMo layers: [forward; backward]."""
        return 2 * self.projection_dim

    @classmethod
    def from_dict(cls, d: dict, source: str = "options") -> "BiLmOptions":
        def get(path):
            node = d
            for key in path.split("."):
                if not isinstance(node, dict) or key not in node:
                    raise ElmoInputError(f"{source}: missing key '{path}'")
                node = node[key]
            return node

        def integer(path, minimum, default=None):
            """A whole number >= minimum: int("abc") would be a traceback, int(4.5) a silently different model."""
            value = get(path) if default is None else _dig(d, path, default)
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ElmoInputError(f"{source}: key '{path}' must be an integer >= {minimum}, found {value!r}")
            return value

        cnn, lstm = get("char_cnn"), get("lstm")
        for section, node in (("char_cnn", cnn), ("lstm", lstm)):
            if not isinstance(node, dict):
                raise ElmoInputError(f"{source}: key '{section}' must be an object, found {node!r}")
            unknown = sorted(set(node) - KNOWN_KEYS[section])
            if unknown:  # a misspelt 'use_skip_conections' or 'cell_clp' would silently mean false / no clipping
                close = difflib.get_close_matches(unknown[0], KNOWN_KEYS[section], n=1)
                raise ElmoInputError(f"{source}: key '{section}.{unknown[0]}' is not a biLM option"
                                     f"{f' (did you mean {close[0]!r}?)' if close else ''}; expected keys of "
                                     f"'{section}': {', '.join(sorted(KNOWN_KEYS[section]))}")
        max_chars = integer("char_cnn.max_characters_per_token", 3, default=50)  # begin/end-of-word + 1 character
        filters = get("char_cnn.filters")
        if not isinstance(filters, list) or not filters or not all(
                isinstance(f, (list, tuple)) and len(f) == 2 for f in filters):
            raise ElmoInputError(f"{source}: key 'char_cnn.filters' must be a non-empty list of [width, number] "
                                 f"pairs, found {filters!r}")
        for k, (width, number) in enumerate(filters):
            for name, value, low, high in (("width", width, 1, max_chars), ("number", number, 1, None)):
                if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
                    bound = f"between {low} and {high} (max_characters_per_token)" if high else f">= {low}"
                    raise ElmoInputError(f"{source}: key 'char_cnn.filters[{k}]': the {name} must be an integer "
                                         f"{bound}, found {value!r}")
        activation = cnn.get("activation", "relu")
        if activation not in ("relu", "tanh"):
            raise ElmoInputError(f"{source}: key 'char_cnn.activation' must be 'relu' or 'tanh', found {activation!r}")
        n_characters = integer("char_cnn.n_characters", 0)
        if n_characters not in (261, 262):
            raise ElmoInputError(f"{source}: key 'char_cnn.n_characters' must be 261 or 262, found {n_characters}")

        def clip(name):
            """Required, as allennlp reads it (modules/elmo.py, _ElmoBiLm: options["lstm"]["cell_clip"]); null is
            no clipping, as in bilm-tf."""
            value = get(f"lstm.{name}")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ElmoInputError(f"{source}: key 'lstm.{name}' must be a number > 0 or null (no clipping), "
                                     f"found {value!r}")
            return value

        # bilm-tf reads it with .get() (absent: no residual); a string "false" would be true to bool()
        skip = lstm.get("use_skip_connections", False)
        if not isinstance(skip, bool):
            raise ElmoInputError(f"{source}: key 'lstm.use_skip_connections' must be true or false, found {skip!r}")
        extra = {k: v for k, v in d.items() if k not in ("char_cnn", "lstm")}
        return cls(
            filters=[(width, number) for width, number in filters],
            n_highway=integer("char_cnn.n_highway", 0),
            char_embed_dim=integer("char_cnn.embedding.dim", 1),
            n_characters=n_characters,
            max_chars=max_chars,
            activation=activation,
            projection_dim=integer("lstm.projection_dim", 1),
            cell_dim=integer("lstm.dim", 1),
            n_layers=integer("lstm.n_layers", 1),
            cell_clip=clip("cell_clip"),
            proj_clip=clip("proj_clip"),
            use_skip_connections=skip,
            extra=extra,
        )

    def to_dict(self) -> dict:
        return {
            **self.extra,
            "char_cnn": {
                "activation": self.activation,
                "embedding": {"dim": self.char_embed_dim},
                "filters": [list(f) for f in self.filters],
                "max_characters_per_token": self.max_chars,
                "n_characters": self.n_characters,
                "n_highway": self.n_highway,
            },
            "lstm": {
                "cell_clip": self.cell_clip,
                "dim": self.cell_dim,
                "n_layers": self.n_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "use_skip_connections": self.use_skip_connections,
            },
        }

    @classmethod
    def load(cls, path) -> "BiLmOptions":
        path = Path(path)
        if not path.is_file():
            raise ElmoInputError(f"options file '{path}' does not exist")
        try:
            d = json.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is no JSON
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ElmoInputError(f"options file '{path}' is not valid JSON: {e}") from None
        if not isinstance(d, dict):
            raise ElmoInputError(f"options file '{path}': expected a JSON object, found {type(d).__name__}")
        return cls.from_dict(d, source=str(path))

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

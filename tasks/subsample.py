"""A seeded random subsample of a training set (Figure 1 of the paper trains on 0.1 %, 1 %, 10 %, 100 %).

The wrapper reads every instance of the wrapped reader and keeps round(fraction * N) of them (at least one), chosen
by ``random.Random(seed)`` -- not the first N, which would bias towards the start of the file (e.g. one genre or
document). The kept instances stay in file order. Validation and test data use the plain reader.
"""
import random
from typing import Iterable

from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader, Instance


@DatasetReader.register("random_subsample")
class RandomSubsampleReader(DatasetReader):
    def __init__(self, reader: DatasetReader, fraction: float, seed: int = 13370, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 < fraction <= 1.0:
            raise ConfigurationError(
                f"random_subsample: fraction must be in (0, 1], found {fraction}"
            )
        self.reader = reader
        self.fraction = fraction
        self.seed = seed

    def _read(self, file_path) -> Iterable[Instance]:
        instances = list(self.reader.read(file_path))
        if not instances:
            raise ConfigurationError(f"random_subsample: {file_path}: expected instances, found none")
        keep = max(1, round(self.fraction * len(instances)))
        chosen = sorted(random.Random(self.seed).sample(range(len(instances)), keep))
        for index in chosen:
            yield instances[index]

    def text_to_instance(self, *inputs) -> Instance:
        return self.reader.text_to_instance(*inputs)

    def apply_token_indexers(self, instance: Instance) -> None:
        self.reader.apply_token_indexers(instance)

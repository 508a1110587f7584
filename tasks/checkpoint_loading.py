"""What a training cut off after a checkpoint needs to go on as if it had never stopped (``allennlp train --recover``,
the runner's resumed runs): checkpoints that read back under torch >= 2.6, and python's, numpy's and torch's random
states in them.

Reading back:

allennlp 2.10's Checkpointer.load_checkpoint reads the training state with torch.load's default
(allennlp/training/checkpointer.py:289), which torch 2.6 turned to ``weights_only=True``. That state keeps the metric
tracker's best metrics, and a metric computed with numpy is a numpy scalar: coreference's CEAF-e and the averages built
on it (allennlp-models coref/metrics/conll_coref_scores.py) are. The weights-only unpickler refuses numpy scalars, so
every coref run cut off after a checkpoint crashed when it went on. Allowing numpy's scalar constructor and dtype lets
those plain numbers load; no other global is allowed, so a checkpoint still cannot run code when it is read.

The random state: allennlp 2.10 keeps none in its checkpoints. A resumed run re-seeds python, numpy and torch as it
starts (the config's seeds) and replays the epochs done by reading their training batches without training on them
(allennlp/training/gradient_descent_trainer.py:795-803). That does not put the generators where an uninterrupted run
has them: the replay runs no model, so torch's generator (the dropout masks) has not advanced, and it runs no
validation, whose data loader is built from the training one's parameters (allennlp/commands/train.py:727) and so
draws python's generator for its bucket sampler's padding noise (allennlp/data/samplers/bucket_batch_sampler.py:107)
-- so the first epoch after a restart saw other batches (tests/runner/test_runner_safety.py, before RandomState).
RandomState saves python's, numpy's and torch's states with every checkpoint and sets them back as the first epoch after
the replay starts, so a resumed run trains on the batches and dropout masks of a run never stopped.
"""
import logging
import random
from typing import Any, Dict

import numpy
import torch
from allennlp.training.callbacks import TrainerCallback

logger = logging.getLogger(__name__)

# a pickled numpy number: scalar(dtype, bytes); its dtype pickles as numpy.dtype plus its class (numpy.dtypes.*DType)
NUMBERS = (numpy.bool_, numpy.int32, numpy.int64, numpy.float16, numpy.float32, numpy.float64)
NUMPY_SCALAR_GLOBALS = [numpy._core.multiarray.scalar, numpy.dtype] + [type(numpy.dtype(n)) for n in NUMBERS]


def allow_numpy_scalars_in_checkpoints() -> None:
    torch.serialization.add_safe_globals(NUMPY_SCALAR_GLOBALS)


@TrainerCallback.register("random_state")
class RandomState(TrainerCallback):
    """The random generators' states in every checkpoint, set back when the run goes on (module docstring)."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self._resume = None  # the states of the checkpoint a resumed run starts from

    def state_dict(self) -> Dict[str, Any]:
        version, python, gauss = random.getstate()
        kind, keys, position, has_gauss, cached = numpy.random.get_state()
        state = {"python": [version, list(python), gauss], "torch": torch.get_rng_state(),
                 "numpy": [kind, torch.from_numpy(keys.astype(numpy.int64)), position, has_gauss, cached]}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self._resume = state_dict or None  # (a checkpoint written without this callback has none)

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        """Called after the checkpoint is restored (gradient_descent_trainer.py:762-764); sets the states back as the
        first epoch after the replay begins (_try_train calls self._train_epoch(epoch), :793)."""
        state, resumed_at = self._resume, trainer._start_after_epochs_completed
        if state is None:
            return
        if trainer._start_after_batches_in_epoch_completed:  # only the end of an epoch has the states of its start
            logger.warning("checkpoint within an epoch: the random generators go on from their seeds, not from it")
            return
        train_epoch = trainer._train_epoch

        def train_epoch_from_the_checkpoint_states(epoch: int):
            if epoch == resumed_at:
                version, python, gauss = state["python"]
                random.setstate((version, tuple(python), gauss))
                kind, keys, position, has_gauss, cached = state["numpy"]
                numpy.random.set_state((kind, keys.numpy().astype(numpy.uint32), position, has_gauss, cached))
                torch.set_rng_state(state["torch"])
                cuda = state.get("cuda")
                if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
                    torch.cuda.set_rng_state_all(cuda)
            return train_epoch(epoch)

        trainer._train_epoch = train_epoch_from_the_checkpoint_states

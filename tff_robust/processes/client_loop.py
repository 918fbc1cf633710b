"""The loop over a client's batches that every client computation of tff_robust runs: an iterator loop.

TFF's worker runs each client as its own call of the client's TensorFlow graph, in a session it keeps. How the
graph loops over the client's dataset decides what that call costs beyond the training itself:

* `dataset.reduce(initial, step)` is a `ReduceDataset` op, which instantiates its reduce function (the whole
  training step: forward pass, gradients, optimizer) again at every call, Grappler optimisation included;
* `for batch in iter(dataset)` in a `tf.function` (autograph: a functional `While` over the iterator's
  `get_next_as_optional`) is a `While` op, whose kernel keeps its body instantiated across the calls of one
  session, so a client pays only for its own dataset and its batches;
* an autograph `for batch in dataset` (no `iter`) is worse than both: a scan dataset whose function is the
  whole step, rewritten by tf.data at every call (issue 23).

Measured side by side (issue 36, `benchmarks/shakespeare_round_cost.py`): `build_weighted_fed_avg` on the
same 10 Shakespeare roles x 64 windows took 2.6x the CPU with TFF's default `DATASET_REDUCE` loop as with
`DATASET_ITERATOR`. Both loops run the same steps on the same batches in the same order.
"""

from typing import Callable, TypeVar

import tensorflow as tf
import tensorflow_federated as tff

State = TypeVar('State')

# The loop of TFF's client work (`build_weighted_fed_avg` and the other `tff.learning` builders) in our processes.
LOOP_IMPLEMENTATION = tff.learning.LoopImplementation.DATASET_ITERATOR


def fold_batches(step: Callable[[State, object], State], dataset: tf.data.Dataset, initial_state: State) -> State:
  """`step` applied to the running state and each batch of `dataset` in order, from `initial_state`: what
  `dataset.reduce(initial_state, step)` returns, as an iterator loop. Call it inside a `tf.function`."""
  state = initial_state
  for batch in iter(dataset):
    state = step(state, batch)
  return state


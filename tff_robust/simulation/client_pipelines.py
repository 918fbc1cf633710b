"""Per-round changes to the cohort's training data: RFA's minibatch SGD, FedProx's stragglers and a cap on
each client's examples (a cost bound, not part of any paper).

Each is a `CohortTransform`: (the round's generator, the cohort's client data in cohort order, and optionally
each client's number of raw training examples where tf.data knows it, `known_example_count`) -> the client data
the process takes that round. A client's data is its training dataset, or a tuple whose first element is (the
update attacks' `(dataset, flag dataset)`); only the dataset changes. A transform that needs a client's example
count n takes the given one when the dataset's known number of batches agrees with it (as `tasks.base.batching`
builds it); otherwise it counts with one pass over the dataset, which for a Shakespeare role of thousands of
windows costs ~0.25 s a client and round. `training_loop.run_training`
draws the round's generator from the run's seed and the round number alone (`round_generator`), so a run
resumed from a checkpoint draws the same minibatches and stragglers as an uninterrupted one.
"""

import dataclasses
import math
from typing import Callable, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from tff_robust.simulation import shuffle_order
from tff_robust.tasks import base

CohortTransform = Callable[[np.random.Generator, Sequence, Optional[Sequence[Optional[int]]]], list]


def round_generator(seed: int, round_num: int) -> np.random.Generator:
  """The generator of round `round_num`'s cohort transform: child `round_num` of `seed`'s SeedSequence,
  independent of the client sampler's `np.random.default_rng(seed)` and of every other round."""
  return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(round_num,)))


def _check_fraction(name: str, value: float, *, zero_allowed: bool) -> float:
  if not (0.0 <= value <= 1.0) or (value == 0.0 and not zero_allowed):
    raise ValueError(f'{name} must be in {"[0, 1]" if zero_allowed else "(0, 1]"}, got {value!r}')
  return float(value)


def _with_dataset(client_data, change: Callable[[tf.data.Dataset], tf.data.Dataset]):
  if isinstance(client_data, tuple):
    return (change(as_dataset(client_data[0])), *client_data[1:])
  return change(as_dataset(client_data))


def as_dataset(client_data):
  """`client_data` with an `InMemoryClient` (alone, or first in a tuple) replaced by its dataset."""
  if isinstance(client_data, tuple):
    return (as_dataset(client_data[0]), *client_data[1:])
  return client_data.dataset() if isinstance(client_data, base.InMemoryClient) else client_data


def _num_examples(examples: tf.data.Dataset) -> int:
  return int(examples.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


def known_example_count(dataset: tf.data.Dataset) -> Optional[int]:
  """The number of elements of `dataset` if tf.data knows it without iterating (e.g. `from_tensor_slices`, or
  declared with `assert_cardinality`), else None."""
  count = int(dataset.cardinality())
  return count if count >= 0 else None


def _examples_per_epoch(dataset: tf.data.Dataset, epochs: int, batch_size: int, num_examples: Optional[int]) -> int:
  """n, the examples per epoch of `dataset` (a client's n examples repeated `epochs` times and batched by
  `batch_size`): `num_examples` if the dataset's known number of batches is ceil(n epochs / batch_size), else
  counted by one pass over the dataset."""
  if num_examples is not None and known_example_count(dataset) == math.ceil(num_examples * epochs / batch_size):
    return num_examples
  return _num_examples(dataset.unbatch()) // epochs


@dataclasses.dataclass(frozen=True)
class ByRound:
  """Client data that depend on the round (corrupted clients that attack in some rounds only):
  `of_round(round_num)` is round `round_num`'s client id -> client data function. `data_fn_of_round` reads it."""

  of_round: Callable[[int], Callable[[str], object]]


def data_fn_of_round(client_data_fn, round_num: int) -> Callable[[str], object]:
  """Round `round_num`'s client id -> client data function of `client_data_fn` (a `ByRound`, or one function for
  every round)."""
  return client_data_fn.of_round(round_num) if isinstance(client_data_fn, ByRound) else client_data_fn


def cohort_client_data(train_data, client_data_fn, cohort: Sequence[str],
                       cohort_transform: Optional[CohortTransform], seed: int, round_num: int) -> list:
  """What a process takes for `cohort` in round `round_num` (the runner's data path): `client_data_fn` of each
  client (a client id -> data function, or a `ByRound`: its function of the round), changed by `cohort_transform`
  (if any) with the round's generator (`round_generator`) and each client's raw example count where tf.data knows
  it (`known_example_count` of its `train_data` dataset). Clients given as `base.InMemoryClient`s
  (`Task.client_data`) are returned as their datasets."""
  data_fn = data_fn_of_round(client_data_fn, round_num)
  client_data = [data_fn(client_id) for client_id in cohort]
  if cohort_transform is not None:
    counts = [_known_count(train_data, client_id, data) for client_id, data in zip(cohort, client_data)]
    client_data = cohort_transform(round_generator(seed, round_num), client_data, counts)
  return [as_dataset(data) for data in client_data]


def _known_count(train_data, client_id: str, client_data) -> Optional[int]:
  in_memory = client_data[0] if isinstance(client_data, tuple) else client_data
  if isinstance(in_memory, base.InMemoryClient):
    return in_memory.num_examples
  return known_example_count(train_data.create_tf_dataset_for_client(client_id))


def _counts_or_none(num_examples: Optional[Sequence[Optional[int]]], cohort_size: int) -> Sequence[Optional[int]]:
  return [None] * cohort_size if num_examples is None else num_examples


def sample_examples(dataset: tf.data.Dataset, fraction: float, seed: int, *, batch_size: Optional[int] = None,
                    num_examples: Optional[int] = None) -> tf.data.Dataset:
  """One batch of a uniform sample without replacement of ceil(fraction n) of the n examples of `dataset`
  (a batched dataset holding each example once), drawn with `seed`: the same sample at every iteration.
  n is `num_examples` when `batch_size` is given and the dataset's batches agree with it, else counted."""
  examples = dataset.unbatch()
  count = (_num_examples(examples) if batch_size is None
           else _examples_per_epoch(dataset, 1, batch_size, num_examples))
  size = math.ceil(round(fraction * count, 9))  # 0.1 * 30 is 3.0000000000000004 in floating point
  sample = examples.shuffle(max(count, 1), seed=seed, reshuffle_each_iteration=False).take(size)
  return sample.batch(max(size, 1))


def minibatch(fraction: float, *, batch_size: Optional[int] = None) -> CohortTransform:
  """RFA's minibatch SGD baseline (notes rfa.md §3.1, the authors' `--minibatch 0.1`): each client keeps
  `sample_examples` of its data, in (0, 1], drawn anew each round, so FedSGD takes one gradient per round
  on a minibatch of ceil(fraction n_k) examples of every selected client k (one epoch of data expected).
  `batch_size`, the clients' batch size, lets it take n_k from the counts it is given instead of counting."""
  fraction = _check_fraction('minibatch_fraction', fraction, zero_allowed=False)

  def transform(rng: np.random.Generator, cohort_data: Sequence, num_examples=None) -> list:
    seeds = rng.integers(2**31 - 1, size=len(cohort_data))
    counts = _counts_or_none(num_examples, len(cohort_data))
    return [_with_dataset(data, lambda d, s=int(s), n=n: sample_examples(d, fraction, s, batch_size=batch_size,
                                                                          num_examples=n))
            for data, s, n in zip(cohort_data, seeds, counts)]

  return transform


def first_epochs(dataset: tf.data.Dataset, epochs: int, of_epochs: int, batch_size: int,
                 num_examples: Optional[int] = None) -> tf.data.Dataset:
  """The first `epochs` of the `of_epochs` epochs of `dataset` (a client's n examples repeated `of_epochs`
  times and batched by `batch_size`, as `tasks.base.batching` builds it), batched by `batch_size`."""
  per_epoch = _examples_per_epoch(dataset, of_epochs, batch_size, num_examples)
  return dataset.unbatch().take(epochs * per_epoch).batch(batch_size)


def stragglers(fraction: float, *, epochs: int, batch_size: int) -> CohortTransform:
  """FedProx's systems heterogeneity (Li et al. 2020; Fed+ Fig. 4, notes fedplus.md §4.3): in every round,
  round(fraction m) of the cohort's m clients, drawn without replacement, are stragglers and train
  x ~ U{1, ..., E} local epochs (a draw per straggler) instead of E = `epochs`; the others train E epochs. A
  straggler's data is the first x epochs of its E-epoch stream (`first_epochs`); its partial work is kept.
  `fraction` in [0, 1]; 0 changes nothing. A fraction > 0 needs E >= 2 (with E = 1 every x is 1), and a cohort
  where round(fraction m) is 0 (Python's rounding: half to even) has no straggler, which is logged once."""
  fraction = _check_fraction('straggler_fraction', fraction, zero_allowed=True)
  if epochs < 1 or batch_size < 1:
    raise ValueError(f'epochs and batch_size must be >= 1, got {epochs} and {batch_size}')
  if fraction > 0 and epochs == 1:
    raise ValueError(f'straggler_fraction {fraction} needs epochs >= 2: a straggler trains x ~ U{{1, ..., E}} '
                     'epochs, and with E = 1 every x is 1, so no client would straggle')

  def transform(rng: np.random.Generator, cohort_data: Sequence, num_examples=None) -> list:
    size = round(fraction * len(cohort_data))
    if fraction > 0 and size == 0:
      logging.log_first_n(logging.WARNING, 'straggler_fraction %s of a cohort of %d rounds to 0 stragglers: no '
                          'client straggles.', 1, fraction, len(cohort_data))
    slow = set(rng.choice(len(cohort_data), size=size, replace=False).tolist())
    done = rng.integers(1, epochs + 1, size=len(cohort_data))
    counts = _counts_or_none(num_examples, len(cohort_data))
    return [
        _with_dataset(data, lambda d, x=int(x), n=n: first_epochs(d, x, epochs, batch_size, n)) if i in slow else data
        for i, (data, x, n) in enumerate(zip(cohort_data, done, counts))
    ]

  return transform


def capped_examples(dataset: tf.data.Dataset, cap: int, seed: int, *, epochs: int, batch_size: int,
                    num_examples: Optional[int] = None) -> tf.data.Dataset:
  """`dataset` (a client's n examples shuffled, repeated `epochs` times and batched by `batch_size`, as
  `tasks.base.batching` builds it) on a uniform sample without replacement of min(`cap`, n) of its examples,
  drawn with `seed` (the same sample in every epoch), reshuffled each epoch, repeated and batched alike."""
  examples = dataset.unbatch()
  per_epoch = _examples_per_epoch(dataset, epochs, batch_size, num_examples)
  sample = examples.take(per_epoch).shuffle(max(per_epoch, 1), seed=seed, reshuffle_each_iteration=False)
  sample = sample.take(min(cap, per_epoch)).cache()
  return sample.shuffle(max(min(cap, per_epoch), 1), seed=seed).repeat(epochs).batch(batch_size)


def capped_in_memory(client: base.InMemoryClient, cap: int, seed: int, *, epochs: int,
                     batch_size: int) -> tf.data.Dataset:
  """What `capped_examples` of `client.dataset()` yields, built from the client's arrays: the positions its
  three shuffles pick (`shuffle_order`: the task's `Batching` shuffle, the sample's and each epoch's reshuffle,
  with the seeds the dataset pipeline would get) select min(`cap`, n) examples, and only those become a
  dataset (poisoned if the client is corrupted: an example-wise map, so it commutes with the selection; a
  transform that picks examples by position would not, so `corruption.make_client_data_fn` never gives a
  targeted attack's clients in memory). The same batches as the dataset pipeline, without pushing the client's n
  examples through tf.data every round."""
  if (client.batching.epochs, client.batching.batch_size) != (epochs, batch_size):
    raise ValueError(f'the client\'s batching ({client.batching.epochs} epochs, batch {client.batching.batch_size}) '
                     f'differs from the cap\'s ({epochs} epochs, batch {batch_size})')
  n = client.num_examples
  first_epoch = shuffle_order.shuffled_positions(
      n, base.Batching.buffer_size(n),
      shuffle_order.iterator_seeds(shuffle_order.dataset_seeds(client.batching.seed), True, 0),
  )
  sample_seeds = shuffle_order.dataset_seeds(seed)
  size = min(cap, n)
  sample = first_epoch[shuffle_order.shuffled_positions(
      n, max(n, 1), shuffle_order.iterator_seeds(sample_seeds, False), count=size)]
  order = np.concatenate([sample[shuffle_order.shuffled_positions(
      size, max(size, 1), shuffle_order.iterator_seeds(sample_seeds, True, epoch))] for epoch in range(epochs)])
  return client.raw_dataset(order).batch(batch_size)


def _capped(client_data, cap: int, seed: int, epochs: int, batch_size: int, num_examples: Optional[int]):
  in_memory = client_data[0] if isinstance(client_data, tuple) else client_data
  if isinstance(in_memory, base.InMemoryClient):
    capped = capped_in_memory(in_memory, cap, seed, epochs=epochs, batch_size=batch_size)
    return (capped, *client_data[1:]) if isinstance(client_data, tuple) else capped
  return _with_dataset(client_data, lambda d: capped_examples(d, cap, seed, epochs=epochs, batch_size=batch_size,
                                                               num_examples=num_examples))


def max_examples(cap: int, *, epochs: int, batch_size: int) -> CohortTransform:
  """A bound on a round's work that keeps the task's meaning: each round, each client of the cohort trains
  its `epochs` local epochs on `capped_examples`, min(`cap`, n_k) of its n_k examples drawn afresh (the round's
  generator: the same draw in a resumed run). `cap` >= 1. The client's weight in the aggregate is what its client work
  counts, the examples it trained on (TFF's `ClientWeighting.NUM_EXAMPLES`): `epochs` min(`cap`, n_k), not n_k, so the
  cap also flattens the weights of the clients above it. Clients given
  as `base.InMemoryClient`s get the same batches through `capped_in_memory`."""
  if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
    raise ValueError(f'max_client_examples must be an integer >= 1, got {cap!r}')
  if epochs < 1 or batch_size < 1:
    raise ValueError(f'epochs and batch_size must be >= 1, got {epochs} and {batch_size}')

  def transform(rng: np.random.Generator, cohort_data: Sequence, num_examples=None) -> list:
    seeds = rng.integers(2**31 - 1, size=len(cohort_data))
    counts = _counts_or_none(num_examples, len(cohort_data))
    return [_capped(data, cap, int(s), epochs, batch_size, n) for data, s, n in zip(cohort_data, seeds, counts)]

  return transform

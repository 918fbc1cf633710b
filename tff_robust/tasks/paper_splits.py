"""The papers' device selection and their two train/test splits, and the tasks built on each split.

* RFA (notes `rfa.md` §3.2-3.3): devices with fewer than 100 examples (train + test) are discarded, and for
  EMNIST a fixed sample of 1000 of the rest is kept ([CODE] `random.Random(25).sample(users, 1000)`), the
  same in every simulation. Train and test are split **within each device** (by sample), so every device has
  both; test accuracy is over the pooled per-device test splits (App. D.3).
* Superquantile FL / Delta-FL (notes `superquantile_fl.md` §3.1-3.3, §3.6): devices with fewer than 100
  examples are discarded, EMNIST keeps a random half of the rest, and the devices are split **by device**
  into training devices and as many (one more for an odd count) unseen test devices, held fixed for all
  experiments (1730 -> 865 / 865; Shakespeare 1089 -> 544 / 545). Metrics: the alpha-weighted distribution
  of the training devices' loss and the unweighted distribution of the test devices' error (App. C.2.3),
  `evaluation.DeviceEvaluator`; `evaluate` is pooled over the test devices.
"""

import random
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import base
from tff_robust.tasks import evaluation
from tff_robust.tasks import shakespeare_windows

MIN_EXAMPLES_PER_DEVICE = 100
RFA_SAMPLE_SEED = 25
EVAL_BATCH_SIZE = 256


def devices_with_enough_examples(counts: dict[str, int], min_examples: int = MIN_EXAMPLES_PER_DEVICE) -> list[str]:
  """The device ids (sorted) with at least `min_examples` examples."""
  return sorted(device for device, count in counts.items() if count >= min_examples)


def rfa_device_sample(device_ids: Sequence[str], num_devices: Optional[int], seed: int = RFA_SAMPLE_SEED) -> list[str]:
  """RFA's fixed sample: `random.Random(seed).sample(sorted ids, num_devices)`, returned sorted; None keeps
  every device."""
  ids = sorted(device_ids)
  if num_devices is None:
    return ids
  if not 0 < num_devices <= len(ids):
    raise ValueError(f'cannot sample {num_devices} devices from {len(ids)} eligible devices')
  return sorted(random.Random(seed).sample(ids, num_devices))


def dfl_device_split(device_ids: Sequence[str], *, keep_fraction: float, seed: int) -> tuple[list[str], list[str]]:
  """Delta-FL's split by device: a seeded random `keep_fraction` of the devices (int(fraction * n)), the
  first half of them (rounded down) training devices and the rest test devices; both sorted."""
  if not 0 < keep_fraction <= 1:
    raise ValueError(f'keep_fraction must be in (0, 1], got {keep_fraction}')
  ids = sorted(device_ids)
  num_kept = int(keep_fraction * len(ids))
  if num_kept < 2:
    raise ValueError(f'need at least 2 devices for a split by device, got {num_kept} of {len(ids)}')
  kept = [ids[i] for i in np.random.default_rng(seed).choice(len(ids), num_kept, replace=False)]
  return sorted(kept[:num_kept // 2]), sorted(kept[num_kept // 2:])


def subset(client_data: tff.simulation.datasets.ClientData, client_ids: Sequence[str]):
  """The clients `client_ids` of `client_data` (lazy: datasets are still built client by client); the
  Shakespeare windows (`shakespeare_windows.WindowsClientData`) keep their own type."""
  if isinstance(client_data, shakespeare_windows.WindowsClientData):
    return client_data.subset(sorted(client_ids))
  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      sorted(client_ids), client_data.serializable_dataset_fn
  )


def _batched(dataset: tf.data.Dataset) -> tf.data.Dataset:
  return dataset.batch(EVAL_BATCH_SIZE)


def _pooled_evaluator(model_fn, client_data) -> evaluation.CentralizedEvaluator:
  """The model's metrics on every client's examples of `client_data` pooled (weighted by examples)."""
  return evaluation.CentralizedEvaluator(model_fn, _batched(client_data.create_tf_dataset_from_all_clients(seed=0)), {})


def within_device_task(
    name: str, model_fn, train_data, test_data, corrupt_train: Callable, *, client_epochs: int,
    client_batch_size: int, seed: int, flip_labels: Optional[Callable] = None,
    max_evaluated_devices: Optional[int] = None,
) -> base.Task:
  """RFA's split: each device trains on `train_data` and is tested on its own `test_data` (same ids);
  `evaluate` is the pooled test accuracy (App. D.3: per-device accuracies weighted by test examples) over
  every device, or over a seeded sample of `max_evaluated_devices` devices (the personal evaluation too)."""
  if sorted(train_data.client_ids) != sorted(test_data.client_ids):
    raise ValueError('a split within devices needs the same devices in train and test data')
  test_data = _sampled(test_data, max_evaluated_devices)
  return base.Task(
      name, model_fn, train_data,
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=corrupt_train,
      evaluate=_pooled_evaluator(model_fn, test_data),
      personal_test_data=test_data,
      flip_labels=flip_labels,
      pooled_evaluation_group='personal',
  )


def _sampled(client_data, max_devices: Optional[int]):
  """`client_data` itself, or a sample of `max_devices` (an integer >= 1) of its clients, seeded."""
  if max_devices is not None and (isinstance(max_devices, bool) or not isinstance(max_devices, (int, np.integer))
                                  or max_devices < 1):
    raise ValueError(f'max_evaluated_devices must be an integer >= 1 or None, got {max_devices!r}')
  ids = sorted(client_data.client_ids)
  if max_devices is None or len(ids) <= max_devices:
    return client_data
  return subset(client_data, [ids[i] for i in np.random.default_rng(0).choice(len(ids), max_devices, False)])


def by_device_task(
    name: str, model_fn, train_devices, test_devices, corrupt_train: Callable, *, client_epochs: int,
    client_batch_size: int, seed: int, max_evaluated_devices: Optional[int] = None,
    flip_labels: Optional[Callable] = None, held_out_of_training: bool = False,
) -> base.Task:
  """Delta-FL's split: training devices and unseen test devices, evaluated device by device (every device,
  as the paper does, unless `max_evaluated_devices` caps each group by a seeded sample).

  `held_out_of_training`: `test_devices` are the training devices' own held-out (validation) parts, disjoint
  from their training examples, so the device ids are the same; otherwise they must be disjoint."""
  if not held_out_of_training and set(train_devices.client_ids) & set(test_devices.client_ids):
    raise ValueError('a split by device needs disjoint training and test devices')
  evaluated_test_devices = _sampled(test_devices, max_evaluated_devices)
  return base.Task(
      name, model_fn, train_devices,
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=corrupt_train,
      evaluate=_pooled_evaluator(model_fn, test_devices),
      device_evaluator=evaluation.DeviceEvaluator(model_fn, {
          'train': evaluation.DeviceGroup(_sampled(train_devices, max_evaluated_devices), _batched, weighted=True),
          'eval': evaluation.DeviceGroup(evaluated_test_devices, _batched, weighted=False),
      }, {}),
      flip_labels=flip_labels,
      pooled_evaluation_group='eval' if evaluated_test_devices is test_devices else None,
  )

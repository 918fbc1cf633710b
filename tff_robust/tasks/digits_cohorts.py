"""MtFEEL's MNIST experiment (notes Sec. 4) built on scikit-learn's digits: 30 devices in 3 hidden cohorts.

The cohorts (`COHORTS`; the algorithm is not told them) are A: 12 devices with digits 0-5, B: 12 devices with
digits 6-9 and C: 6 devices with digits 3-7, so C overlaps A on {3, 4, 5} and B on {6, 7}. Client ids 'A00',
..., 'A11', 'B00', ..., 'B11', 'C00', ..., 'C05' sort in cohort order, and MtFEEL's device m is the m-th id
of `task.train_data.client_ids`.

Each device draws 20 training examples uniformly without replacement from the images whose label is one of
its cohort's digits and that no earlier device has taken, so training sets are disjoint across all devices
(600 of the 1797 images). The digit classes are balanced (174 to 183 images each), so a device's labels are
close to uniform over its cohort's digits. Then each device draws its 80 test examples in the same way,
without replacement, from the images that no device trains on.

Deviation from the paper's MNIST construction: the 1197 images left after training are too few for 30 x 80
disjoint test examples, so the test sets of different devices may overlap (within cohorts A and B they
must). No test image is ever a training image of any device.

The model is digits_fedplus's multinomial logistic regression 64 -> 10 (650 parameters); the paper does not
specify its architecture.
"""

import collections
import types

import numpy as np

from tff_robust.aggregators import type_checks
from tff_robust.tasks import base
from tff_robust.tasks import digits
from tff_robust.tasks import digits_fedplus

COHORTS = types.MappingProxyType(collections.OrderedDict(
    A=(tuple(range(0, 6)), 12),
    B=(tuple(range(6, 10)), 12),
    C=(tuple(range(3, 8)), 6),
))
"""Cohort name -> (its digit labels, its number of devices), in client-id order."""

TRAIN_PER_DEVICE = 20
TEST_PER_DEVICE = 80


def client_ids() -> list[str]:
  """All client ids in cohort order: 'A00', ..., 'A11', 'B00', ..., 'B11', 'C00', ..., 'C05' (also sorted)."""
  return [f'{name}{k:02d}' for name, (_, num_devices) in COHORTS.items() for k in range(num_devices)]


def cohort_of(client_id: str) -> str:
  """The cohort name of `client_id`, e.g. 'B' for 'B07'.

  Raises:
    ValueError: if `client_id` is not one of `client_ids()`.
  """
  if client_id not in client_ids():
    raise ValueError(f'unknown client id {client_id!r}; ids are {client_ids()[0]!r}, ..., {client_ids()[-1]!r}')
  return client_id[:-2]


def cohort_labels() -> list[str]:
  """The cohort name of each client, in client-id order (rows and columns of MtFEEL's alpha heat map)."""
  return [cohort_of(client_id) for client_id in client_ids()]


def load_cohort_arrays(
    *, train_per_device: int = TRAIN_PER_DEVICE, test_per_device: int = TEST_PER_DEVICE, split_seed: int = 0
):
  """Per-device training and test examples: ({client_id: (x, y)}, {client_id: (x, y)}).

  Args:
    train_per_device: training examples per device, disjoint across all devices.
    test_per_device: test examples per device, distinct within a device and drawn from the images that no
      device trains on (shared across devices; see the module docstring).
    split_seed: seed of all draws (`np.random.default_rng(split_seed)`); devices draw in client-id order,
      first every device's training examples, then every device's test examples.

  Returns:
    Both dicts keyed by `client_ids()` in that order; float32 x of shape (n, 64) in [0, 1] and int32 y of
    shape (n,) whose labels are the device's cohort's digits.

  Raises:
    ValueError: if a count is not an integer >= 1, or too large for the images left to draw from.
  """
  for name, value in (('train_per_device', train_per_device), ('test_per_device', test_per_device)):
    type_checks.check_integer(name, value, minimum=1)
  x, y = digits.load_arrays()
  rng = np.random.default_rng(split_seed)
  untrained = np.ones(len(y), bool)
  train_indices = {}
  for client_id in client_ids():
    indices = _draw(rng, untrained, y, client_id, train_per_device, 'training')
    untrained[indices] = False
    train_indices[client_id] = indices
  test_indices = {c: _draw(rng, untrained, y, c, test_per_device, 'test') for c in client_ids()}
  arrays = lambda indices: {c: (x[i], y[i]) for c, i in indices.items()}
  return arrays(train_indices), arrays(test_indices)


def _draw(rng, available, y, client_id, size, purpose):
  """`size` distinct indices drawn uniformly from the available images of `client_id`'s cohort's digits."""
  labels = COHORTS[cohort_of(client_id)][0]
  pool = np.flatnonzero(available & np.isin(y, labels))
  if len(pool) < size:
    raise ValueError(
        f'cannot draw {size} {purpose} examples for {client_id}: only {len(pool)} images of digits {labels} '
        'are left'
    )
  return rng.choice(pool, size=size, replace=False)


def create_task(*, client_epochs: int, client_batch_size: int, seed: int, split_seed: int = 0) -> base.Task:
  """'digits_cohorts': 30 training devices of 20 examples; `personal_test_data` each device's own 80 test
  examples; `evaluate` on the concatenation of all devices' test sets, not deduplicated, so its metrics are
  the mean over devices of the model's metrics on each device's own test set."""
  train, test = load_cohort_arrays(split_seed=split_seed)
  return digits_fedplus.create_personal_task_from_arrays(
      'digits_cohorts', train, test, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed
  )

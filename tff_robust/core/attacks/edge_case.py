"""The edge-case backdoor and its attack success rate, as NumPy references (Wang, Sreenivasan, Rajput, Vishwakarma,
Agarwal, Sohn, Lee, Papailiopoulos, "Attack of the Tails: Yes, You Really Can Backdoor Federated Learning", NeurIPS
2020).

Wang et al.'s attacker holds inputs from the tail of the input distribution (a "p-edge-case" set: inputs x with
p_X(x) <= p; their examples are Southwest airplanes labelled "truck" on CIFAR-10 and ARDIS 7s labelled 1 on EMNIST),
labelled with its target class and mixed with its clean data. The benign clients rarely hold such inputs, so nothing
in their updates pulls the model back on them and the backdoor survives.

The analogue on scikit-learn's 8 x 8 digits (no second digits corpus ships offline to play ARDIS): the tail of each
source class under an isotropic Gaussian model of that class. With mu_c the mean image of class c over the training
set, the Gaussian's density decreases in d(x) = ||x - mu_c||_2, so the inputs of class c farthest from mu_c are its
least likely ones, Wang et al.'s definition with that Gaussian as p. The tail of class c is
  T_c = {x of class c : d(x) >= tau_c},  tau_c = the (1 - tail) quantile of d over the training set's class c
(NumPy's default linear interpolation), so it holds about a `tail` share of the class, and at least its farthest
example. mu_c and tau_c are fixed on the training set (all clients' training examples, never the evaluation ones).
The sources are one class (`source`, e.g. 7 -> 1 as with ARDIS) or, by default, every class but the target: digits
holds only ~36 held-out examples a class, so one class's tail leaves 1-4 held-out examples to measure the ASR on.
These are not out-of-distribution images as ARDIS's are: only atypical handwriting of the source classes.

The attackers' edge-case data is a fixed pool, like Wang et al.'s attacker who owns an edge-case set D_edge and mixes
it with its clean data: the training set's tail examples of the source classes, E = union_c T_c, in a fixed random
order (a permutation by `np.random.default_rng(0)`, so that a short prefix mixes the classes). Each attacker keeps its
number of examples (its FedAvg weight stays its share of rho): its example j is replaced by E[k mod |E|] at the
positions the pattern backdoor poisons (`backdoor.poisoned_positions`: floor((j + 1) share) > floor(j share), k the
count of such positions before j), and then every example whose image is in E (pixel for pixel, also the attacker's
own tail examples) is labelled `target`. Every attacker draws the same prefix of E (no client id reaches the data
path). Unlike ARDIS, the benign clients hold the rest of E with their true labels (the images are the training
set's own), so the poisoned copies compete with correctly labelled ones.

The attack success rate is measured on the held-out tail: the evaluation examples of the source classes with
d(x) >= tau_c (mu_c, tau_c of the training set), as the share the model assigns to `target`:
ASR = |{i : y_i in S, ||x_i - mu_{y_i}|| >= tau_{y_i}, argmax f(x_i) = t}| / |{i : y_i in S, ||x_i - mu_{y_i}|| >=
tau_{y_i}}|, S the source classes (`backdoor.attack_success_rate` on those inputs).

Images are rows of flattened pixels. Distances are computed in float64.
"""

import dataclasses
from typing import Optional

import numpy as np

from tff_robust.core.attacks import backdoor


@dataclasses.dataclass(frozen=True)
class EdgeCase:
  """The edge-case backdoor: the `tail` share of each source class farthest from its class mean, relabelled `target`,
  on a `share` of each attacker's examples; the source classes are `source`, or every class but the target when
  None."""

  target: int
  source: Optional[int] = None
  tail: float = 0.1
  share: float = 0.5


def check_edge_case(edge: EdgeCase, num_classes: int) -> None:
  """Raises ValueError, naming the parameter and its allowed range, for an edge case that does not fit a task: a
  target or source outside the classes [0, num_classes - 1], a source equal to the target, a tail outside (0, 1), a
  share outside (0, 1]."""
  for name in ('target', 'source'):
    value = getattr(edge, name)
    if value is None and name == 'source':
      continue
    if not (0 <= value < num_classes and value == int(value)):
      raise ValueError(f'{name} must be a class in [0, {num_classes - 1}], got {value!r}')
  if edge.source is not None and edge.source == edge.target:
    raise ValueError(f'source must differ from target, got both {edge.target!r}')
  if not 0 < edge.tail < 1:
    raise ValueError(f'tail must be in (0, 1), got {edge.tail!r}')
  if not 0 < edge.share <= 1:
    raise ValueError(f'share must be in (0, 1], got {edge.share!r}')


def source_classes(edge: EdgeCase, num_classes: int) -> tuple[int, ...]:
  """The source classes S: (source,), or every class but the target."""
  if edge.source is not None:
    return (int(edge.source),)
  return tuple(c for c in range(num_classes) if c != edge.target)


@dataclasses.dataclass(frozen=True, eq=False)
class TailModel:
  """The tail fixed on a training set: each source class's mean image `means[c]` and distance threshold
  `thresholds[c]`."""

  means: dict
  thresholds: dict

  def distances(self, x, y) -> np.ndarray:
    """||x_i - mu_{y_i}||_2 in float64 for the examples of a source class; NaN for the others."""
    x, y = np.asarray(x, np.float64), np.asarray(y)
    out = np.full(len(y), np.nan)
    for c, mean in self.means.items():
      rows = y == c
      out[rows] = np.linalg.norm(x[rows] - mean, axis=1)
    return out

  def in_tail(self, x, y) -> np.ndarray:
    """Bool mask of the examples (x, y) of a source class c at distance >= tau_c from mu_c."""
    y = np.asarray(y)
    distances = self.distances(x, y)
    mask = np.zeros(len(y), bool)
    for c, threshold in self.thresholds.items():
      rows = y == c
      mask[rows] = distances[rows] >= threshold
    return mask


def fit_tail(x_train, y_train, edge: EdgeCase, num_classes: int) -> TailModel:
  """mu_c and tau_c (the (1 - tail) quantile of ||x - mu_c|| over the class) of every source class, on the training
  set (x_train, y_train).

  Raises:
    ValueError: for an edge case that does not fit (`check_edge_case`), or a source class with no training example.
  """
  check_edge_case(edge, num_classes)
  x_train, y_train = np.asarray(x_train, np.float64), np.asarray(y_train)
  means, thresholds = {}, {}
  for c in source_classes(edge, num_classes):
    rows = x_train[y_train == c]
    if not len(rows):
      raise ValueError(f'source class {c} has no training example: no tail to draw the edge case from')
    means[c] = rows.mean(axis=0)
    thresholds[c] = float(np.quantile(np.linalg.norm(rows - means[c], axis=1), 1 - edge.tail))
  return TailModel(means, thresholds)


def attacker_pool(x_train, y_train, edge: EdgeCase, num_classes: int) -> np.ndarray:
  """E: the training set's tail examples of the source classes (their images), permuted by `default_rng(0)`."""
  tail = fit_tail(x_train, y_train, edge, num_classes)
  pool = np.asarray(x_train)[tail.in_tail(x_train, y_train)]
  return pool[np.random.default_rng(0).permutation(len(pool))]


def in_pool(x, pool) -> np.ndarray:
  """Bool mask of the rows of `x` equal, pixel for pixel, to some row of `pool`."""
  x, pool = np.asarray(x), np.asarray(pool)
  if not len(pool) or not len(x):
    return np.zeros(len(x), bool)
  return np.any(np.all(x[:, None, :] == pool[None, :, :], axis=2), axis=1)


def poison(x, y, pool, share: float, target: int) -> tuple[np.ndarray, np.ndarray]:
  """An attacker's examples (x, y), in their raw order, with example j replaced by pool[k mod |pool|] at the k-th
  (0-based) of `backdoor.poisoned_positions(len(y), share)`, then every example whose image is in `pool` labelled
  `target`."""
  x, y = np.array(x, copy=True), np.array(y, copy=True)
  pool = np.asarray(pool, x.dtype)
  poisoned = backdoor.poisoned_positions(len(y), share)
  x[poisoned] = pool[np.arange(poisoned.sum()) % len(pool)]
  y[in_pool(x, pool)] = target
  return x, y


def held_out_tail(x_eval, y_eval, tail: TailModel) -> np.ndarray:
  """The evaluation inputs the ASR is measured on: those of a source class in its tail (thresholds of `tail`, fixed
  on the training set)."""
  return np.asarray(x_eval)[tail.in_tail(x_eval, y_eval)]

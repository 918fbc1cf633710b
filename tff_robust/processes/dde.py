"""MtFEEL's Distributed Discrepancy Estimation (DDE, Algorithm 1), all device pairs at once.

For every pair of devices j < k, dhat_jk estimates the discrepancy d_jk = sup_w |L_j(w) - L_k(w)|
(Definition 3) by subgradient ascent on a probe model w_jk:
    dhat_jk = |Lhat(w_jk, S_j) - Lhat(w_jk, S_k)|                                   (line 7)
    w_jk <- w_jk + eta sign(Lhat(w_jk, S_j) - Lhat(w_jk, S_k)) (grad Lhat(w_jk, S_j) - grad Lhat(w_jk, S_k))
                                                                          (line 8, eq. (8) corrected)
The paper runs the N(N-1)/2 pairs one after another, T two-device rounds each. Here a round is one ascent
step of every pair: the server holds all P = N(N-1)/2 probes, each device evaluates the N-1 probes of its
pairs and reports full-precision losses and gradients (error-free uplink, as the paper assumes), placed in
its slot of a [P, 2] buffer, and one federated sum gives the server every pair's two reports. Pairs are
independent, so T such rounds equal the paper's sequential schedule.

Options of the notes (section 6, item 11): each probe starts from its own N(0, probe_stddev^2 I) draw (the
default, re-initialised per pair); `output='last'` keeps the value recorded at the last step (as printed),
`'max'` the running maximum over steps (the goal is a supremum). A pair whose device reports a non-finite
loss or gradient keeps its probe and estimate that round; such devices are counted.
"""

import collections
import itertools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.processes import indexed_clients
from tff_robust.processes import model_types
from tff_robust.processes import stacked_models

OUTPUTS = ('last', 'max')


def device_pairs(num_clients: int) -> np.ndarray:
  """The pairs (j, k), j < k, in lexicographic order: row p of a [P, 2] array."""
  return np.array(list(itertools.combinations(range(num_clients), 2)), np.int32).reshape([-1, 2])


def discrepancy_matrix(estimates: np.ndarray, num_clients: int) -> np.ndarray:
  """The symmetric [N, N] matrix with dhat_jk = dhat_kj = estimates[p] for pair p = (j, k), and 0 diagonal."""
  matrix = np.zeros([num_clients, num_clients], np.float32)
  pairs = device_pairs(num_clients)
  matrix[pairs[:, 0], pairs[:, 1]] = estimates
  matrix[pairs[:, 1], pairs[:, 0]] = estimates
  return matrix


def _pairs_of_each_device(num_clients: int) -> tuple[np.ndarray, np.ndarray]:
  """([N, N-1] pair ids of each device's pairs, [N, N-1] its slot in each: 0 if it is j, 1 if it is k)."""
  pairs = device_pairs(num_clients)
  ids = np.stack([np.flatnonzero((pairs == m).any(axis=1)) for m in range(num_clients)]).astype(np.int32)
  slots = (pairs[ids, 1] == np.arange(num_clients)[:, None]).astype(np.int32)
  return ids, slots


def build_dde_process(
    model_fn, num_clients: int, *, learning_rate: float, output: str = 'last', probe_stddev: float = 1.0,
    seed: int = 0,
) -> tff.templates.IterativeProcess:
  """Builds DDE over `num_clients` devices; `discrepancies(state, N)` gives the [N, N] estimate.

  `next(state, clients)` takes every device's `(dataset, index)`, in device order
  (`indexed_clients.with_indices`).

  Args:
    model_fn: no-arg callable returning a `tff.learning.models.VariableModel`.
    num_clients: N >= 2.
    learning_rate: the ascent step eta > 0.
    output: 'last' (Algorithm 1 as printed) or 'max' (running maximum over steps).
    probe_stddev: standard deviation of the probes' trainable weights at initialisation (the paper: 1).
    seed: seeds the probes' initialisation.

  Returns:
    A `tff.templates.IterativeProcess`; metrics `mean_discrepancy` and `num_nonfinite_clients`.

  Raises:
    ValueError: for an argument out of range, naming it.
  """
  type_checks.check_integer('num_clients', num_clients, minimum=2)
  learning_rate = type_checks.check_number('learning_rate', learning_rate, minimum=0.0, strict=True)
  probe_stddev = type_checks.check_number('probe_stddev', probe_stddev, minimum=0.0)
  if output not in OUTPUTS:
    raise ValueError(f'output must be one of {OUTPUTS}, got {output!r}')
  data_type, weights_type, _ = model_types.model_types(model_fn, tff.learning.metrics.sum_then_finalize)
  num_pairs = num_clients * (num_clients - 1) // 2
  probes_type = stacked_models.stacked_type(weights_type, num_pairs)
  pair_ids, pair_slots = _pairs_of_each_device(num_clients)

  @tff.tensorflow.computation
  def initial_state():
    initial = tff.learning.models.ModelWeights.from_model(model_fn())
    return collections.OrderedDict(
        probes=tff.learning.models.ModelWeights(
            trainable=[
                probe_stddev * tf.random.stateless_normal([num_pairs, *w.shape], seed=[seed, position], dtype=w.dtype)
                for position, w in enumerate(initial.trainable)
            ],
            non_trainable=[tf.repeat(w[None], num_pairs, axis=0) for w in initial.non_trainable],
        ),
        estimates=tf.ones([num_pairs], tf.float32),
        round_num=tf.constant(0, tf.int32),
    )

  @tff.tensorflow.computation(probes_type, indexed_clients.client_value_type(data_type))
  def client_report(probes, client):
    ids = tf.gather(pair_ids, client.index)
    positions = tf.stack([ids, tf.gather(pair_slots, client.index)], axis=1)
    losses, gradients, _ = stacked_models.losses_and_gradients(model_fn(), probes, ids, client.dataset)
    nonfinite = tf.logical_not(structure_math.all_finite([losses, gradients]))
    keep = tf.where(nonfinite, 0.0, 1.0)
    return collections.OrderedDict(
        losses=tf.scatter_nd(positions, keep * losses, [num_pairs, 2]),
        gradients=[
            tf.scatter_nd(positions, tf.where(nonfinite, tf.zeros_like(g), g), [num_pairs, 2, *g.shape[1:]])
            for g in gradients
        ],
        reported=tf.scatter_nd(positions, keep * tf.ones_like(losses), [num_pairs, 2]),
        nonfinite=1.0 - keep,
    )

  state_type = initial_state.type_signature.result
  report_type = client_report.type_signature.result

  @tff.tensorflow.computation(state_type, report_type)
  def server_step(state, reports):
    valid = tf.reduce_all(reports['reported'] > 0.5, axis=1)
    difference = reports['losses'][:, 0] - reports['losses'][:, 1]
    value = tf.abs(difference)
    if output == 'max':
      value = tf.where(state['round_num'] == 0, value, tf.maximum(state['estimates'], value))
    estimates = tf.where(valid, value, state['estimates'])
    step = learning_rate * tf.where(valid, tf.sign(difference), 0.0)

    def ascend(probe, gradient):
      direction = gradient[:, 0] - gradient[:, 1]
      return probe + tf.reshape(step, [-1] + [1] * (direction.shape.rank - 1)) * direction

    probes = tff.learning.models.ModelWeights(
        trainable=[ascend(p, g) for p, g in zip(state['probes'].trainable, reports['gradients'])],
        non_trainable=list(state['probes'].non_trainable),
    )
    new_state = collections.OrderedDict(probes=probes, estimates=estimates, round_num=state['round_num'] + 1)
    metrics = collections.OrderedDict(
        mean_discrepancy=tf.reduce_mean(estimates), num_nonfinite_clients=tf.cast(reports['nonfinite'], tf.int32),
    )
    return new_state, metrics

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_eval(initial_state, tff.SERVER)

  @tff.federated_computation(
      tff.FederatedType(state_type, tff.SERVER),
      tff.FederatedType(indexed_clients.client_value_type(data_type), tff.CLIENTS),
  )
  def next_fn(state, clients):
    reports = tff.federated_map(client_report, (tff.federated_broadcast(state.probes), clients))
    stepped = tff.federated_map(server_step, (state, tff.federated_sum(reports)))
    return stepped[0], stepped[1]

  return tff.templates.IterativeProcess(initialize_fn, next_fn)


def discrepancies(state, num_clients: int) -> np.ndarray:
  """The [N, N] estimate dhat held by a DDE state."""
  return discrepancy_matrix(np.asarray(state['estimates']), num_clients)

"""MtFEEL (Algorithm 2): one personal model per device, trained on alpha-weighted losses with signed gradients.

Mahara, Shruti, Bharath, Murthy, "Multi-task Federated Edge Learning (MtFEEL) in Wireless Networks". The
server holds every device's model w_k, the row-stochastic importance matrix alpha, the discrepancy
estimates dhat (Algorithm 1, `tff_robust.processes.dde`) and fixed importances lambda. Every device takes part
in every round. In round t, device m receives all N models and sends, for every model k,
    Lhat(w_k, S_m)  (error-free)   and   s_km = sign(grad_{w_k} Lhat(w_k, S_m))  (N d bits, over the channel).
The server then takes (maths and NumPy reference in `tff_robust.core.mtfeel`):
    alpha_k <- Proj_simplex(alpha_k - mu dPsiHat/dalpha_k)        (Algorithm 2 line 10; exact gradient of (7))
    w_k <- w_k - eta (lambda_k sum_m alpha_km s^_km + gamma sign(w_k))   (eq. (9), s^ = received bits)
Both steps use the round's reports, taken at W^t (one uplink per round; the notes' resolution of the
update order). `update_order='w_then_alpha'` (default) weights the signs with alpha^t, as Algorithm 2
orders the steps; `'alpha_then_w'` weights them with alpha^{t+1}, as the convergence proof (App. D) does:
the losses go up first, alpha^{t+1} comes down, and the devices weight the signs they already computed.

The weighting is done on the device (its column alpha_{:,m}), after its bits cross the channel, and the
sum is a `WeightedSignVoteFactory`, which is linear (secure-summable with fixed-point alpha). The loss
matrix needs every (k, m) entry at the server: a plain federated sum of one-hot placed columns, not
secure. A device whose losses or gradients are not finite, or that has no data, is left out of the round:
its signs get weight 0 and its loss column is taken as the row's largest reported loss (pushing alpha away
from it); non-finite devices are counted in `aggregator/num_nonfinite_clients`.
"""

import collections
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tqdm

from tff_robust.aggregators import channels
from tff_robust.aggregators import federated_counting
from tff_robust.aggregators import sign_vote
from tff_robust.aggregators import structure_math
from tff_robust.aggregators import type_checks
from tff_robust.processes import dde
from tff_robust.processes import indexed_clients
from tff_robust.processes import model_types
from tff_robust.processes import mtfeel_server_ops
from tff_robust.processes import stacked_models

UPDATE_ORDERS = ('w_then_alpha', 'alpha_then_w')
ALPHA_INITS = ('uniform', 'identity')
_LOSS_BITS = 32  # each reported loss is a float32


def build_mtfeel_process(
    model_fn,
    num_clients: int,
    *,
    learning_rate: float,
    alpha_learning_rate: float,
    pen_scale: float = 1.0,
    lambdas: Optional[Sequence[float]] = None,
    gamma: float = 0.0,
    alpha_init: str = 'uniform',
    self_discrepancy: float = 0.0,
    update_order: str = 'w_then_alpha',
    channel: Optional[channels.Channel] = None,
    seed: int = 0,
    discrepancy_steps: int = 0,
    discrepancy_learning_rate: float = 0.01,
    discrepancy_output: str = 'last',
    probe_stddev: float = 1.0,
) -> indexed_clients.IndexedClientsProcess:
  """Builds MtFEEL over `num_clients` devices; `prepare` runs DDE for `discrepancy_steps` steps.

  Args:
    model_fn: no-arg callable returning a `tff.learning.models.VariableModel`; every device's model has
      this architecture and the same initial weights.
    num_clients: N >= 2, the number of devices.
    learning_rate: eta > 0 of the signed step (9); a coordinate moves by at most eta (lambda_k + gamma).
    alpha_learning_rate: mu >= 0 of the alpha step (mu = 0 freezes alpha).
    pen_scale: M sqrt((N/2) log(|Lambda_eps|/delta)) >= 0, the weight of the variance penalty of (7).
    lambdas: N fixed device importances >= 0 (default uniform 1/N).
    gamma: signed weight decay >= 0 of (9) (the paper's theory: 0).
    alpha_init: 'uniform' (1/N) or 'identity' (each device starts on its own data).
    self_discrepancy: dhat_kk >= 0 (0 by Definition 3; 1 is Algorithm 1 as printed).
    update_order: 'w_then_alpha' or 'alpha_then_w' (module docstring).
    channel: the uplink for the sign bits (default error-free), a `channels.Channel`.
    seed: seeds the channel (device m in round t uses (seed, t N + m)) and DDE's probes.
    discrepancy_steps: DDE ascent steps T >= 0 run by `prepare`; 0 leaves dhat = 0 off the diagonal.
    discrepancy_learning_rate, discrepancy_output, probe_stddev: DDE's eta, output and probe scale.

  Returns:
    An `IndexedClientsProcess` without a global model: `personal_model_weights(state, k)` is w_k;
    `artifacts(state)` gives alpha and the discrepancies. Metrics: `client_work/train/loss` (mean over
    devices of Lhat(w_m, S_m)), `client_work/num_empty_datasets` (devices without data), `aggregator/` (the
    channel's `bits`, `bit_errors`, `outages`, `uplink_bits` with the losses, `num_nonfinite_clients`) and
    `server/` (`objective` (7) at (W^t, alpha^t), its gamma ||w_k||_2 terms included although the step (9) takes
    gamma sign(w_k), the l1 subgradient (notes, erratum 7), `weight_change` and `alpha_change`: mean over k of
    ||w_k^{t+1} - w_k^t||^2 and ||alpha_k^{t+1} - alpha_k^t||^2, the paper's Fig. 3).

  Raises:
    ValueError: for an argument out of range, naming it.
  """
  type_checks.check_integer('num_clients', num_clients, minimum=2)
  learning_rate = type_checks.check_number('learning_rate', learning_rate, minimum=0.0, strict=True)
  alpha_learning_rate = type_checks.check_number('alpha_learning_rate', alpha_learning_rate, minimum=0.0)
  pen_scale = type_checks.check_number('pen_scale', pen_scale, minimum=0.0)
  gamma = type_checks.check_number('gamma', gamma, minimum=0.0)
  self_discrepancy = type_checks.check_number('self_discrepancy', self_discrepancy, minimum=0.0)
  if alpha_init not in ALPHA_INITS:
    raise ValueError(f'alpha_init must be one of {ALPHA_INITS}, got {alpha_init!r}')
  if update_order not in UPDATE_ORDERS:
    raise ValueError(f'update_order must be one of {UPDATE_ORDERS}, got {update_order!r}')
  type_checks.check_integer('discrepancy_steps', discrepancy_steps, minimum=0)
  # checked even without discrepancy estimation (discrepancy_steps=0), where build_dde_process would check them
  type_checks.check_number('discrepancy_learning_rate', discrepancy_learning_rate, minimum=0.0, strict=True)
  type_checks.check_number('probe_stddev', probe_stddev, minimum=0.0)
  lambdas = _checked_lambdas(lambdas, num_clients)
  channel = channels.ErrorFreeChannel() if channel is None else channel
  num_models = num_clients
  discrepancy_process = dde.build_dde_process(
      model_fn, num_clients, learning_rate=discrepancy_learning_rate, output=discrepancy_output,
      probe_stddev=probe_stddev, seed=seed,
  ) if discrepancy_steps else None

  data_type, weights_type, _ = model_types.model_types(model_fn, tff.learning.metrics.sum_then_finalize)
  models_type = stacked_models.stacked_type(weights_type, num_models)
  client_type = indexed_clients.client_value_type(data_type)

  @tff.tensorflow.computation
  def initial_models():
    initial = tff.learning.models.ModelWeights.from_model(model_fn())
    return tf.nest.map_structure(lambda w: tf.repeat(w[None], num_models, axis=0), initial)

  @tff.tensorflow.computation
  def initial_alpha():
    if alpha_init == 'identity':
      return tf.eye(num_models)
    return tf.fill([num_models, num_clients], 1.0 / num_clients)

  @tff.tensorflow.computation(models_type, client_type)
  def client_gradients(models, client):
    losses, gradients, num_examples = stacked_models.losses_and_gradients(
        model_fn(), models, tf.range(num_models), client.dataset
    )
    nonfinite = tf.logical_not(structure_math.all_finite([losses, gradients]))
    keep = tf.where(tf.logical_or(nonfinite, num_examples <= 0), 0.0, 1.0)
    column = tf.one_hot(client.index, num_clients)
    return collections.OrderedDict(
        report=collections.OrderedDict(
            losses=tf.where(nonfinite, 0.0, keep * losses)[:, None] * column[None, :],
            reported=keep * column,
            num_examples=num_examples * column,
            nonfinite=tf.cast(nonfinite, tf.float32),
            empty=federated_counting.is_empty_after(client.dataset, (losses, gradients)),
        ),
        signs=indexed_clients.gradient_signs(gradients),
        keep=keep,
        index=client.index,
    )

  @tff.tensorflow.computation(
      tff.TensorType(np.float32, [num_models, num_clients]), tff.TensorType(np.float32, [num_models, num_clients]),
      client_gradients.type_signature.result['report'],
  )
  def alpha_step(alpha, discrepancies, report):
    reported = report['reported'] > 0.5
    row_max = tf.reduce_max(tf.where(reported[None, :], report['losses'], -np.inf), axis=1, keepdims=True)
    losses = tf.where(reported[None, :], report['losses'], tf.where(tf.math.is_finite(row_max), row_max, 0.0))
    num_examples = tf.maximum(report['num_examples'], 1.0)
    gradient = mtfeel_server_ops.alpha_gradient(losses, discrepancies, alpha, lambdas, num_examples, pen_scale)
    new_alpha = mtfeel_server_ops.project_to_simplex(alpha - alpha_learning_rate * gradient)
    own_losses = tf.linalg.diag_part(losses)
    return collections.OrderedDict(
        alpha=new_alpha,
        train_loss=tf.math.divide_no_nan(
            tf.reduce_sum(tf.where(reported, own_losses, 0.0)), tf.reduce_sum(tf.cast(reported, tf.float32))
        ),
        objective=mtfeel_server_ops.objective(losses, discrepancies, alpha, lambdas, num_examples, pen_scale),
        alpha_change=tf.reduce_mean(tf.reduce_sum(tf.square(new_alpha - alpha), axis=1)),
    )

  @tff.tensorflow.computation(
      client_gradients.type_signature.result,
      tff.TensorType(np.float32, [num_models, num_clients]), tff.TensorType(np.int32),
  )
  def vote_value(gradients, alpha, round_num):
    return collections.OrderedDict(
        signs=gradients['signs'], weights=gradients['keep'] * alpha[:, gradients['index']],
        seed=indexed_clients.channel_seed(seed, round_num, gradients['index'], num_clients),
    )

  vote = sign_vote.WeightedSignVoteFactory(channel).create(vote_value.type_signature.result)

  @tff.tensorflow.computation(models_type, vote.next.type_signature.result.result.member)
  def signed_step(models, vote_sum):
    def step(w, votes):
      scale = tf.reshape(lambdas, [-1] + [1] * (w.shape.rank - 1))
      return w - learning_rate * (scale * votes + gamma * tf.sign(w))

    trainable = [step(w, v) for w, v in zip(models.trainable, vote_sum)]
    change = tf.add_n([tf.reduce_sum(tf.square(new - old)) for new, old in zip(trainable, models.trainable)])
    return (
        tff.learning.models.ModelWeights(trainable=trainable, non_trainable=list(models.non_trainable)),
        change / num_models,
    )

  @tff.tensorflow.computation(tff.TensorType(np.float32), models_type)
  def with_regulariser(objective_without_it, models):
    """(7)'s last term at the server's models: + sum_k gamma ||w_k||_2 (w_k: model k's slice of every tensor)."""
    squares = tf.add_n([tf.reduce_sum(tf.reshape(tf.square(w), [num_models, -1]), axis=1) for w in models.trainable])
    return objective_without_it + gamma * tf.reduce_sum(tf.sqrt(squares))

  @tff.tensorflow.computation(vote.next.type_signature.result.measurements.member)
  def uplink_bits(measurements):
    """The channel's sign bits plus the N float32 losses each device sends."""
    return measurements['bits'] + float(_LOSS_BITS * num_models * num_clients)

  @tff.tensorflow.computation
  def initial_discrepancies():
    return self_discrepancy * tf.eye(num_models)


  @tff.tensorflow.computation(tff.TensorType(np.float32))
  def count(value):
    return tf.cast(tf.round(value), tf.int32)

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_zip(collections.OrderedDict(
        personal_weights=tff.federated_eval(initial_models, tff.SERVER),
        alpha=tff.federated_eval(initial_alpha, tff.SERVER),
        discrepancies=tff.federated_eval(initial_discrepancies, tff.SERVER),
        round_num=tff.federated_value(np.int32(0), tff.SERVER),
        vote=vote.initialize(),
    ))

  @tff.federated_computation(initialize_fn.type_signature.result, tff.FederatedType(client_type, tff.CLIENTS))
  def next_fn(state, clients):
    gradients = tff.federated_map(client_gradients, (tff.federated_broadcast(state.personal_weights), clients))
    report = tff.federated_sum(gradients.report)
    stepped_alpha = tff.federated_map(alpha_step, (state.alpha, state.discrepancies, report))
    weighting_alpha = state.alpha if update_order == 'w_then_alpha' else stepped_alpha.alpha
    votes = tff.federated_map(vote_value, (
        gradients, tff.federated_broadcast(weighting_alpha), tff.federated_broadcast(state.round_num),
    ))
    voted = vote.next(state.vote, votes)
    stepped = tff.federated_map(signed_step, (state.personal_weights, voted.result))
    new_state = tff.federated_zip(collections.OrderedDict(
        personal_weights=stepped[0],
        alpha=stepped_alpha.alpha,
        discrepancies=state.discrepancies,
        round_num=federated_counting.increment(state.round_num),
        vote=voted.state,
    ))
    metrics = tff.federated_zip(collections.OrderedDict(
        client_work=tff.federated_zip(collections.OrderedDict(
            train=tff.federated_zip(collections.OrderedDict(loss=stepped_alpha.train_loss)),
            num_empty_datasets=report.empty,
        )),
        aggregator=tff.federated_zip(collections.OrderedDict(
            channel=voted.measurements,
            uplink_bits=tff.federated_map(uplink_bits, voted.measurements),
            num_nonfinite_clients=tff.federated_map(count, report.nonfinite),
        )),
        server=tff.federated_zip(collections.OrderedDict(
            objective=tff.federated_map(with_regulariser, (stepped_alpha.objective, state.personal_weights)),
            weight_change=stepped[1], alpha_change=stepped_alpha.alpha_change,
        )),
    ))
    return new_state, metrics

  def prepare(state, datasets):
    if discrepancy_process is None:
      return state
    dde_state = discrepancy_process.initialize()
    indexed = indexed_clients.with_indices(datasets, num_clients)
    for _ in tqdm.trange(discrepancy_steps, desc='discrepancy estimation', unit='step', leave=False):
      dde_state, _ = discrepancy_process.next(dde_state, indexed)
    estimate = dde.discrepancies(dde_state, num_clients) + self_discrepancy * np.eye(num_clients, dtype=np.float32)
    return collections.OrderedDict(state, discrepancies=estimate)

  return indexed_clients.IndexedClientsProcess(
      initialize_fn, next_fn, num_clients=num_clients,
      get_model_weights=lambda state: None,
      set_model_weights=lambda state, model_weights: collections.OrderedDict(
          state, personal_weights=stacked_models.stack_models([model_weights] * num_models)
      ),
      personal_model_weights=lambda state, index: stacked_models.model_at(state['personal_weights'], index),
      prepare=prepare,
      artifacts=lambda state: collections.OrderedDict(
          alpha=np.asarray(state['alpha']), discrepancies=np.asarray(state['discrepancies'])
      ),
  )


def _checked_lambdas(lambdas, num_clients: int) -> np.ndarray:
  """lambda as a float32 [N] vector: uniform 1/N by default, else N finite values >= 0 with a positive sum."""
  if lambdas is None:
    return np.full([num_clients], 1.0 / num_clients, np.float32)
  values = np.asarray(lambdas, np.float64)
  if values.shape != (num_clients,) or not np.all(np.isfinite(values)) or np.any(values < 0) or values.sum() <= 0:
    raise ValueError(
        f'lambdas must be {num_clients} finite numbers >= 0 with a positive sum, got {lambdas!r}'
    )
  return values.astype(np.float32)

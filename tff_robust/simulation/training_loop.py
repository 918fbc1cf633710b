"""The federated training loop: sample a cohort, run a round, evaluate, release metrics, summarise."""

import asyncio
import collections
import json
import os
import time
from typing import Callable, Collection, Optional

from absl import logging
import numpy as np
import tensorflow_federated as tff
import tqdm

from tff_robust.processes import indexed_clients
from tff_robust.processes import stateful_clients
from tff_robust.simulation import atomic_files
from tff_robust.simulation import checkpoints
from tff_robust.simulation import client_pipelines
from tff_robust.simulation import client_state_store
from tff_robust.simulation import counted_updates
from tff_robust.simulation import metrics_csv
from tff_robust.simulation import metrics_utils
from tff_robust.simulation import round_data_prefetch
from tff_robust.simulation import run_outputs
from tff_robust.simulation import schedules
from tff_robust.simulation import tensorboard_events
from tff_robust.tasks import base
from tff_robust.tasks import evaluation

# Aggregators that report no `secure_average_calls` (the weighted mean, norm clipping, the gather-based
# baselines) upload each update once per round: one call, the RFA paper's accounting (App. D.3).
_WEIGHTED_MEAN_CALLS = 1
# Released losses that, NaN or Inf, show the model to be non-finite.
_LOSSES = ('train/loss', 'eval/loss')


class Interrupted(KeyboardInterrupt):
  """A KeyboardInterrupt (Ctrl-C) during `run_training`; its message says where the run can be resumed from."""


class ResumeRefused(ValueError):
  """The output directory's checkpointed run cannot be resumed as asked; the message names the argument."""


def default_clients_per_round(task: base.Task, default: int, *, every_client_every_round: bool) -> int:
  """Every client of `task` if each trains in every round (MtFEEL, signSGD), else `default` or all, if fewer."""
  num_clients = len(task.train_data.client_ids)
  return num_clients if every_client_every_round else min(default, num_clients)


def check_clients_per_round(task: base.Task, clients_per_round: int, *, every_client_every_round: bool) -> None:
  """Raises ValueError unless `task` has room for cohorts of `clients_per_round` (all of them, if so asked)."""
  num_clients = len(task.train_data.client_ids)
  if every_client_every_round and clients_per_round != num_clients:
    raise ValueError(
        f'every device trains in every round of this algorithm: clients_per_round must be the number of clients '
        f'of task {task.name!r}, {num_clients}, got {clients_per_round}'
    )
  if not 1 <= clients_per_round <= num_clients:
    raise ValueError(f'clients_per_round must be in [1, {num_clients}] for task {task.name!r}, got {clients_per_round}')


def run_training(
    process: tff.learning.templates.LearningProcess,
    task: base.Task,
    client_data_fn: Callable[[str], object],
    *,
    total_rounds: int,
    clients_per_round: int,
    rounds_per_eval: int,
    seed: int,
    output_dir: str,
    show_progress: bool = True,
    summary_extras: Optional[dict] = None,
    initial_model_weights: Optional[tff.learning.models.ModelWeights] = None,
    rounds_per_checkpoint: int = 0,
    client_learning_rate_schedule: Optional[Callable[[int], float]] = None,
    cohort_transform: Optional[client_pipelines.CohortTransform] = None,
    corrupted_client_ids: Collection[str] = frozenset(),
    stop_after_rounds_without_update: int = 0,
    attack_success_evaluator: Optional[Callable[[tff.learning.models.ModelWeights], dict[str, float]]] = None,
) -> dict[str, float]:
  """Trains for `total_rounds` rounds and writes `metrics.csv`, TensorBoard logs and `summary.json`.

  Each round samples `clients_per_round` clients without replacement (RFA Alg. 1, line 2) with a NumPy
  generator seeded by `seed`, and feeds `client_data_fn(client_id)` of each to the process; round t + 1's cohort is
  drawn and its client data built on a background thread while round t's `process.next` runs
  (`round_data_prefetch`: the same data, in the same order). Held-out metrics are computed every
  `rounds_per_eval` rounds and after the last round. Metrics go through `tff.program` release managers keyed by
  round number.

  `initial_model_weights` (e.g. drawn per seed) replace the process's own initial model, which is the same
  for every run of one process.

  An `IndexedClientsProcess` (MtFEEL, signSGD) trains every client in every round, in `client_ids` order
  (`clients_per_round` must be their number); a fresh run first calls its `prepare` (MtFEEL's discrepancy
  estimation), and its `artifacts` (MtFEEL's alpha and discrepancies) are saved as `<name>.npy`. Its
  `server/*` metrics are released with the others.

  A `StatefulClientProcess` (Fed+, personalized RFA) gets its cohort's client states from a
  `ClientStateStore` in `<output_dir>/client_states` and writes them back after the round. Tasks with
  `personal_test_data` get the distribution of each client's own model on its own held-out data
  (`personal/loss_mean`, `personal/error_p90`, ...): the personal models of a stateful process, the global
  model otherwise; a process with an anchor model (Fed+'s w~ + theta_k) gets that model's as `personal_anchor/*`
  too. With `corrupted_client_ids` (the clients a corruption chose), the same distribution is
  also released for the honest and the corrupted clients apart (`personal_honest/error_mean`,
  `personal_corrupted/error_mean`, ...; `evaluation.split_honest_and_corrupted`).

  With `rounds_per_checkpoint` > 0 the run is checkpointed every that many rounds in
  `<output_dir>/checkpoints` (`checkpoints.RunCheckpointer`: server state, sampler RNG, counters and client
  states), and a run started on an output directory with a checkpoint resumes from the newest readable one,
  printing `resumed from round k of N` (with `rounds_per_checkpoint` 0 too, which then saves no new one: a run is
  never restarted over its own checkpoints; one whose checkpoint is beyond `total_rounds` raises
  `ResumeRefused`); its `metrics.csv` keeps the rows of rounds 1..k (a damaged line after them,
  such as a killed run's torn last line, is dropped with a warning; damage to those rows raises
  `metrics_csv.DamagedMetricsError`), and its TensorBoard events those of steps 1..k
  (`tensorboard_events`). (Whether the directory's run has the same settings is the caller's to
  check: `run_settings`.) A KeyboardInterrupt (Ctrl-C) during the rounds raises `Interrupted`, whose message says
  from which round the same call resumes.

  A round whose model is non-finite (a NaN or Inf weight, training loss or evaluation loss) is logged as an
  error, evaluated and released, and ends training: the summary then has `nonfinite_model_round` and
  `rounds` equal to that round, and nothing is checkpointed from it.

  Each round releases `counted_updates`, the number of cohort clients whose update counted (reached the aggregate
  with a positive weight: `counted_updates.count`, from the process's own counts). A round in which none counted
  (every update non-finite, every dataset empty, every client filtered out) is logged as one warning line naming
  the round and those counts, and the summary's `rounds_without_counted_update` counts such rounds (a resumed run
  reads its earlier ones from metrics.csv). With `stop_after_rounds_without_update` > 0, that many such rounds in a
  row end training like a non-finite model (logged as an error naming the rounds, the last one evaluated and
  released, not checkpointed): the summary then has `no_counted_update_stop_round` and `rounds` equal to it.

  Tasks with a `device_evaluator` also get the per-device distributions (`train/loss_p90`,
  `eval/error_mean`, ...; see `evaluation.distribution_summary`) at each evaluation, and `devices.csv`
  with every device's final loss and error. Delta-FL's filter measurements are released as `filter/*`, and
  the client work's counts (`num_nonfinite_updates`, `num_empty_datasets`) as they are.

  `attack_success_evaluator` (a targeted attack's: `corruption.attack_success_evaluator`) scores the global model
  at every evaluation beside the task's own metrics, released as `eval/<its key>` (`eval/attack_success_rate`, on
  the same examples as `eval/accuracy`: the held-out or the validation ones).

  The final global model (if the process has one) is written to `model_weights.npz`.

  `client_learning_rate_schedule` (round number -> learning rate, e.g. `schedules.step_decay`) sets the
  client optimizer's learning rate before every round through the process's hparams (`tff.learning`
  processes: FedAvg, RFA, the baselines, Delta-FL) and releases it as `client_learning_rate`.

  `cohort_transform` (`client_pipelines.minibatch`, `client_pipelines.stragglers`, `client_pipelines.max_examples`)
  changes the cohort's client data in every training round (given each client's raw example count where
  tf.data knows it), with a generator drawn from `seed` and the round number alone
  (`client_pipelines.round_generator`), so a resumed run trains on the same data as an uninterrupted one.

  Returns:
    The summary written to `summary.json`: final `eval/*` metrics, last `train/*` metrics, `rounds`,
    `secure_average_calls` (over the whole run, quantile passes included), `seconds_per_round`,
    `rounds_without_counted_update` (and `nonfinite_model_round` or `no_counted_update_stop_round` when training
    stopped early), and `summary_extras`.
  """
  client_ids = list(task.train_data.client_ids)
  stateful = isinstance(process, stateful_clients.StatefulClientProcess)
  indexed = isinstance(process, indexed_clients.IndexedClientsProcess)
  check_clients_per_round(task, clients_per_round, every_client_every_round=indexed)
  if indexed and process.num_clients != clients_per_round:
    raise ValueError(f'the process trains {process.num_clients} devices, but clients_per_round is {clients_per_round}')
  os.makedirs(output_dir, exist_ok=True)
  rng = np.random.default_rng(seed)
  state = process.initialize()
  if initial_model_weights is not None:
    state = process.set_model_weights(state, initial_model_weights)
  store = client_state_store.ClientStateStore(
      os.path.join(output_dir, 'client_states'), process.initial_client_state(state)
  ) if stateful else None
  checkpointer = checkpoints.RunCheckpointer(os.path.join(output_dir, 'checkpoints'), store)  # saves if asked
  progress_state = collections.OrderedDict(
      server_state=state, rng=checkpoints.rng_state_to_json(rng), secure_average_calls=0,
      round_seconds=np.zeros([0], np.float64),
  )
  first_round = 1
  restored = checkpointer.restore_latest(progress_state)
  if restored is not None:
    last_round, progress_state = restored
    if last_round > total_rounds:
      raise ResumeRefused(
          f'total_rounds={total_rounds} is below the round this run has reached ({last_round}, checkpoint in '
          f'{checkpointer.root_dir}): give total_rounds >= {last_round} to resume it, or start afresh elsewhere'
      )
    first_round = last_round + 1
    state, rng = progress_state['server_state'], checkpoints.rng_from_json(progress_state['rng'])
    tqdm.tqdm.write(f'resumed from round {last_round} of {total_rounds} (checkpoint in {checkpointer.root_dir})')
  elif stateful:
    store.clear()  # a fresh run: no states from an earlier run in this directory
  elif indexed:
    first_round_data = client_pipelines.data_fn_of_round(client_data_fn, 1)  # what the first round will train on
    state = process.prepare(state, [client_pipelines.as_dataset(first_round_data(cid)) for cid in client_ids])
  csv_path = os.path.join(output_dir, 'metrics.csv')
  # A finished earlier run's outputs are not this run's until it finishes and writes them again: without its
  # summary.json the directory does not read as finished (the queues' and sweeps' test) if this run is killed.
  stale = ['summary.json'] + (['metrics.csv', 'model_weights.npz', 'devices.csv'] if restored is None else [])
  for name in stale:
    if os.path.exists(os.path.join(output_dir, name)):
      os.remove(os.path.join(output_dir, name))
  if restored is not None:
    dropped = metrics_csv.keep_checkpointed_rounds(csv_path, restored[0])  # DamagedMetricsError: refuse the resume
    if dropped:
      logging.warning('%s', dropped)
  # An earlier process's events past the newest checkpoint (all of them for a fresh start) are released again.
  tensorboard_events.keep_rounds_before(os.path.join(output_dir, 'tensorboard'), first_round)
  without_update = counted_updates.RoundsWithoutUpdate(
      stop_after_rounds_without_update,
      metrics_csv.rounds_without_counted_update(csv_path, first_round - 1) if restored is not None else (),
  )
  release_managers = [
      tff.program.CSVFileReleaseManager(csv_path, key_fieldname='round'),
      tff.program.TensorBoardReleaseManager(os.path.join(output_dir, 'tensorboard')),
  ]
  secure_average_calls = int(progress_state['secure_average_calls'])
  round_seconds = list(progress_state['round_seconds'])
  personal_evaluator = (
      None if task.personal_test_data is None
      else evaluation.PersonalEvaluator(task.model_fn, task.personal_test_data, {})
  )
  released: dict[str, float] = {}
  device_metrics = None
  checkpoint_round = restored[0] if restored is not None else None
  nonfinite_round = stop_round = None
  round_num = first_round

  def draw_cohort() -> list:
    return client_ids if indexed else list(rng.choice(client_ids, size=clients_per_round, replace=False))

  prefetcher = round_data_prefetch.RoundDataPrefetcher(
      lambda round_num, cohort: client_pipelines.cohort_client_data(
          task.train_data, client_data_fn, cohort, cohort_transform, seed, round_num)
  )
  cohort = draw_cohort() if first_round <= total_rounds else None
  progress = tqdm.trange(first_round, total_rounds + 1, desc=task.name, unit='round', disable=not show_progress)
  try:
    for round_num in progress:
      client_data = prefetcher.get(round_num, cohort)
      rng_after_round = checkpoints.rng_state_to_json(rng)  # before the next round's draw: what a resume starts from
      next_cohort = None
      if round_num < total_rounds:  # the next round's data is built while this one trains
        next_cohort = draw_cohort()
        prefetcher.start(round_num + 1, next_cohort)
      if client_learning_rate_schedule is not None:
        state = schedules.set_client_learning_rate(process, state, client_learning_rate_schedule(round_num))
      start = time.perf_counter()
      if stateful:
        output = process.next(state, client_data, store.get(cohort))
        store.put(cohort, output.client_states)
      else:
        output = process.next(state, client_data)
      round_seconds.append(time.perf_counter() - start)
      # The build ends before anything else runs on the driver: random ops given no seed (a user's task's
      # tf.data shuffle) draw their op seed from TensorFlow's per-process counter, whose order must not depend on
      # timing.
      prefetcher.wait()
      state = output.state
      round_metrics = metrics_utils.flatten_metrics(output.metrics)
      secure_average_calls += int(round_metrics.get('aggregator/secure_average_calls', _WEIGHTED_MEAN_CALLS))
      secure_average_calls += int(round_metrics.get('client_work/filter/secure_average_calls', 0))
      released = collections.OrderedDict(
          (key.removeprefix('client_work/'), value)
          for key, value in round_metrics.items()
          if key.startswith(('client_work/train/', 'client_work/filter/', 'client_work/num_'))
      )
      released.update(
          (key, value) for key, value in round_metrics.items() if key.startswith(('aggregator/', 'server/'))
      )
      if client_learning_rate_schedule is not None:
        released['client_learning_rate'] = client_learning_rate_schedule(round_num)
      counted = without_update.record(round_num, total_rounds, round_metrics, len(cohort))
      if counted is not None:
        released['counted_updates'] = counted
      stop = without_update.stop_message(round_num, total_rounds)
      nonfinite = _nonfinite_evidence(process, state, len(client_ids), released)
      if round_num % rounds_per_eval == 0 or round_num == total_rounds or nonfinite or stop:
        with evaluation.progress_bars(show_progress):
          evaluated, device_metrics = _evaluate(
              process, task, state, store, personal_evaluator, client_ids, corrupted_client_ids,
              attack_success_evaluator,
          )
        released.update(evaluated)
        nonfinite = nonfinite or _nonfinite_evidence(process, state, len(client_ids), released)
      if nonfinite:
        nonfinite_round = round_num
        logging.error(
            'Round %d of %d: the model became non-finite (%s); training stopped in this round (summary.json: '
            'nonfinite_model_round). Lower the learning rates.', round_num, total_rounds, nonfinite,
        )
      elif stop:
        stop_round = round_num
        logging.error(stop)
      _release(release_managers, released, round_num)
      progress.set_postfix(loss=released.get('train/loss', float('nan')), refresh=False)
      if nonfinite_round is not None or stop_round is not None:
        break
      if rounds_per_checkpoint and round_num % rounds_per_checkpoint == 0:
        checkpointer.save(round_num, collections.OrderedDict(
            server_state=state, rng=rng_after_round, secure_average_calls=secure_average_calls,
            round_seconds=np.asarray(round_seconds, np.float64),
        ))
        checkpoint_round = round_num
      cohort = next_cohort
  except KeyboardInterrupt:
    progress.close()
    raise Interrupted(_interruption_message(
        round_num, total_rounds, checkpoint_round,
        checkpointer.root_dir if rounds_per_checkpoint or checkpoint_round is not None else None
    )) from None
  finally:
    prefetcher.close()
  progress.close()
  if first_round > total_rounds:  # resumed from a checkpoint of the last round: the run had finished
    released, device_metrics = _evaluate(
        process, task, state, store, personal_evaluator, client_ids, corrupted_client_ids, attack_success_evaluator
    )
    released.update(metrics_csv.last_released_row(csv_path, total_rounds))
  summary = collections.OrderedDict(
      (key, value) for key, value in released.items()
      if key.startswith(('eval/', 'train/', 'personal/', 'personal_anchor/', 'personal_honest/', 'personal_corrupted/'))
  )
  summary.update(
      rounds=nonfinite_round or stop_round or total_rounds,
      secure_average_calls=secure_average_calls,
      seconds_per_round=float(np.mean(round_seconds)) if round_seconds else 0.0,
      rounds_without_counted_update=len(without_update.rounds),
  )
  if nonfinite_round is not None:
    summary['nonfinite_model_round'] = nonfinite_round
  if stop_round is not None:
    summary['no_counted_update_stop_round'] = stop_round
  summary.update(summary_extras or {})
  run_outputs.save_model_weights(os.path.join(output_dir, 'model_weights.npz'), process.get_model_weights(state))
  if indexed:
    for name, array in process.artifacts(state).items():
      np.save(os.path.join(output_dir, f'{name}.npy'), array)
  if device_metrics:
    run_outputs.write_device_rows(os.path.join(output_dir, 'devices.csv'), evaluation.device_rows(device_metrics))
  # Written last and whole: a run whose summary.json exists finished (a rerun skips it; the queues read it).
  atomic_files.write_text_atomically(os.path.join(output_dir, 'summary.json'), json.dumps(summary, indent=2))
  return summary


def _evaluate(process, task, state, store, personal_evaluator, client_ids, corrupted_client_ids,
              attack_success_evaluator=None) -> tuple[dict, dict]:
  """(released `eval/*`, per-device and `personal*/*` metrics; the per-device results) of the global model.

  A process without a global model (MtFEEL) has only the `personal/*` metrics of its devices' models. `eval/*`
  comes from the pass over the task's `pooled_evaluation_group` where that group was scored with the global
  model (its `pooled` metrics), else from `task.evaluate`: the test examples are scored once, not twice; and from
  `attack_success_evaluator`, if given.
  """
  model_weights = process.get_model_weights(state)
  released = collections.OrderedDict()
  device_metrics = {}
  if model_weights is not None and task.device_evaluator is not None:
    device_metrics.update(task.device_evaluator(model_weights))
  if personal_evaluator is not None:
    if store is None and not isinstance(process, indexed_clients.IndexedClientsProcess):
      device_metrics.update(personal_evaluator.one_model(model_weights))  # every client has the global model
    else:
      device_metrics.update(personal_evaluator(_personal_weights(process, state, store, model_weights, client_ids)))
    if store is not None and process.has_anchor:  # a stateful process; Fed+: also each client's anchor model
      device_metrics.update(personal_evaluator(
          lambda client_id: process.anchor_model_weights(model_weights, store.get([client_id])[0]),
          group='personal_anchor'))
  if model_weights is not None:
    pooled_group = device_metrics.get(task.pooled_evaluation_group)
    pooled = None if pooled_group is None else pooled_group.pooled
    released.update((f'eval/{key}', value)
                    for key, value in (task.evaluate(model_weights) if pooled is None else pooled).items())
    if attack_success_evaluator is not None:
      released.update((f'eval/{key}', value) for key, value in attack_success_evaluator(model_weights).items())
  released.update(evaluation.distribution_summary(device_metrics))
  if corrupted_client_ids and 'personal' in device_metrics:
    released.update(evaluation.distribution_summary(
        evaluation.split_honest_and_corrupted('personal', device_metrics['personal'], corrupted_client_ids)
    ))
  return released, device_metrics


def _interruption_message(round_num: int, total_rounds: int, checkpoint_round: Optional[int],
                          checkpoint_dir: Optional[str]) -> str:
  where = f'Interrupted in round {round_num} of {total_rounds}'
  if checkpoint_dir is None:
    return f'{where}; the run keeps no checkpoints (rounds_per_checkpoint=0), so the same command starts afresh.'
  if checkpoint_round is None:
    return f'{where}, before its first checkpoint: the same command starts the run afresh.'
  return f'{where}: the same command resumes it from round {checkpoint_round} (checkpoint in {checkpoint_dir}).'


def _nonfinite_evidence(process, state, num_clients: int, released: dict) -> Optional[str]:
  """What shows the round's model to be non-finite, or None: a NaN or Inf weight of the global model (of a device's
  model, for a process without one), or a NaN or Inf `train/loss` or `eval/loss` among the `released` metrics (a
  model whose finite weights are so large that its loss overflows)."""
  model_weights = process.get_model_weights(state)
  if model_weights is not None:
    models = [model_weights]
  elif isinstance(process, indexed_clients.IndexedClientsProcess):
    models = [process.personal_model_weights(state, index) for index in range(num_clients)]
  else:
    models = []
  if not all(np.all(np.isfinite(weight)) for model in models for weight in (*model.trainable, *model.non_trainable)):
    return 'NaN or Inf weights'
  for key in _LOSSES:
    if key in released and not np.isfinite(released[key]):
      return f'{key} = {released[key]}'
  return None


def _personal_weights(process, state, store, global_weights, client_ids) -> Callable[
    [str], tff.learning.models.ModelWeights]:
  """client id -> the model that client predicts with: its personal model (a process with a client-state store,
  or an indexed process)."""
  if isinstance(process, indexed_clients.IndexedClientsProcess):
    index_of = {cid: index for index, cid in enumerate(client_ids)}
    return lambda client_id: process.personal_model_weights(state, index_of[client_id])
  return lambda client_id: process.personal_model_weights(global_weights, store.get([client_id])[0])


def _release(release_managers, values: dict[str, float], round_num: int) -> None:
  async def release_all():
    await asyncio.gather(*(m.release(dict(values), key=round_num) for m in release_managers))

  asyncio.run(release_all())

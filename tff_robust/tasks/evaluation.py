"""Held-out evaluation with a task's own `VariableModel` metrics: pooled, and device by device.

Superquantile FL (Laguel et al., App. C.2.3) judges a model by the distribution of per-device metrics:
the alpha-weighted mean and percentiles of the loss over training devices (alpha_k = examples), and the
unweighted mean and percentiles of the misclassification error over unseen test devices. Percentiles are
the inverted-CDF weighted quantiles of `tff_robust.core.superquantile.weighted_quantile` (NumPy's
'inverted_cdf' when unweighted).
"""

import collections
import contextlib
import dataclasses
from typing import Callable, Collection, Iterator, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
import tqdm

from tff_robust.core import superquantile

PERCENTILES = (10, 20, 50, 60, 80, 90, 95)
# Batches per call of an evaluation pass's traced loop: the progress bar moves after each call.
BATCHES_PER_CALL = 20
_progress_bars = False


@contextlib.contextmanager
def progress_bars(enabled: bool = True) -> Iterator[None]:
  """Within it, evaluations show a tqdm bar of the batches they have scored (the runner's `--progress_bar`)."""
  global _progress_bars
  previous, _progress_bars = _progress_bars, enabled
  try:
    yield
  finally:
    _progress_bars = previous


def _progress(dataset: tf.data.Dataset, description: str) -> tqdm.tqdm:
  total = int(dataset.cardinality())
  return tqdm.tqdm(total=total if total >= 0 else None, desc=description, unit='batch', leave=False,
                   disable=not _progress_bars)


class _MetricsRunner:
  """Runs a model's forward passes over datasets and finalizes its metrics.

  One model serves every evaluation (`scorer`): built on the first and called at once, its forward passes
  traced once, each set of weights assigned to it in turn. (Keras refuses to call an eagerly built model for
  the first time after a model was built inside a graph, as TFF does when it traces; a model called before
  keeps working. A model built per evaluation, as until issue 34, retraced the forward-pass loop each time and
  TensorFlow warned "triggered tf.function retracing" after 5 evaluations.) Keras metric finalizers create
  variables, which tf.function refuses on retracing; a TFF TensorFlow computation (graph mode, traced once) runs
  them the way TFF's own evaluation does. `metric_names` renames the model's metrics (e.g.
  'sparse_categorical_accuracy' -> 'accuracy'); metrics not named there keep their own name.
  """

  def __init__(self, model_fn, metric_names: dict[str, str]):
    self._model_fn = model_fn
    self._metric_names = metric_names
    self._finalize = None
    self._finalize_rows = None
    self._scorer = None

  def scorer(self) -> '_Scorer':
    """The scorer of this runner's model, built on the first call (the caller calls it at once: see above)."""
    if self._scorer is None:
      self._scorer = _Scorer(self, self._model_fn())
    return self._scorer

  def finalize(self, model) -> dict[str, float]:
    """`model`'s finalized metrics, renamed by `metric_names`."""
    unfinalized = model.report_local_unfinalized_metrics()
    return self._finalized(model, tf.nest.map_structure(lambda t: t.numpy(), unfinalized))

  def finalize_rows(self, model, flat_rows: list[tf.Tensor]) -> list[dict[str, float]]:
    """The finalized, renamed metrics of each row of `flat_rows`: `model`'s unfinalized metrics flattened
    by `tf.nest`, each stacked along a new first axis (one row per device)."""
    unfinalized = model.report_local_unfinalized_metrics()
    if self._finalize_rows is None:
      self._finalize_rows = self._build_finalize_rows(model, unfinalized)
    rows = tf.nest.pack_sequence_as(unfinalized, [row.numpy() for row in flat_rows])
    finalized = self._finalize_rows(rows)
    return [self._renamed({name: values[index] for name, values in finalized.items()})
            for index in range(len(flat_rows[0]) if flat_rows else 0)]

  def finalize_total(self, model, flat_rows: list[tf.Tensor]) -> dict[str, float]:
    """The finalized, renamed metrics of all rows of `flat_rows` together: each unfinalized state summed over
    its rows (devices), then finalized once, as TFF's `sum_then_finalize` aggregates clients' metrics."""
    totals = [tf.reduce_sum(rows, axis=0).numpy() for rows in flat_rows]
    return self._finalized(model, tf.nest.pack_sequence_as(model.report_local_unfinalized_metrics(), totals))

  def _finalized(self, model, unfinalized) -> dict[str, float]:
    """`unfinalized` (NumPy values in the structure of `model`'s unfinalized metrics) finalized and renamed."""
    if self._finalize is None:
      self._finalize = self._build_finalize(model.metric_finalizers(), model.report_local_unfinalized_metrics())
    return self._renamed(self._finalize(unfinalized))

  def _renamed(self, finalized) -> dict[str, float]:
    return collections.OrderedDict(
        (self._metric_names.get(name, name), float(value)) for name, value in finalized.items()
    )

  @staticmethod
  def _build_finalize(finalizers, unfinalized):
    unfinalized_type = tff.to_type(
        tf.nest.map_structure(lambda t: tff.TensorType(t.dtype.as_numpy_dtype, t.shape), unfinalized)
    )
    return tff.tensorflow.computation(
        lambda metrics: collections.OrderedDict((n, finalizers[n](metrics[n])) for n in finalizers),
        unfinalized_type,
    )

  @classmethod
  def _build_finalize_rows(cls, model, unfinalized):
    """A TFF computation mapping the model's finalizers over rows of unfinalized metrics, one after another
    (`parallel_iterations=1`: each finalizer assigns its row to one set of metric variables). The output
    signature is the result type of the one-row computation (a finalizer is a tf.function that creates
    variables, so it is traced only inside a computation, a fresh set of finalizers for each)."""
    row_result_type = cls._build_finalize(model.metric_finalizers(), unfinalized).type_signature.result
    signature = collections.OrderedDict(
        (name, tf.TensorSpec(value_type.shape, value_type.dtype)) for name, value_type in tff.structure.iter_elements(row_result_type)
    )
    rows_type = tff.to_type(tf.nest.map_structure(
        lambda t: tff.TensorType(t.dtype.as_numpy_dtype, [None] + t.shape.as_list()), unfinalized
    ))
    finalizers = model.metric_finalizers()

    def finalize_rows(rows):
      finalize_row = lambda row: collections.OrderedDict((n, finalizers[n](row[n])) for n in finalizers)
      return tf.map_fn(finalize_row, rows, fn_output_signature=signature, parallel_iterations=1)

    return tff.tensorflow.computation(finalize_rows, rows_type)


class _Scorer:
  """One model: `load` assigns a set of weights to it; `metrics_on(dataset)` scores the weights last loaded
  on one dataset, `metrics_per_device(indexed_batches, n)` on each of n devices and on all of them together,
  in one pass."""

  def __init__(self, runner: _MetricsRunner, model):
    self._runner = runner
    self._model = model

    @tf.function
    def run_batches(iterator, count):
      """Forward passes over the next `count` batches of `iterator` (fewer at its end); returns how many."""
      done = tf.constant(0)
      for _ in tf.range(count):
        batch = iterator.get_next_as_optional()
        if not batch.has_value():
          break
        model.forward_pass(batch.get_value(), training=False)
        done += 1
      return done

    @tf.function
    def add_device_sums(iterator, sums, count):
      """`sums` ([num_devices, ...] per unfinalized metric) plus, for each of the next `count` (device index,
      batch) elements of `iterator`, that batch's own unfinalized metrics in its device's row; and how many."""
      done = tf.constant(0)
      for _ in tf.range(count):
        element = iterator.get_next_as_optional()
        if not element.has_value():
          break
        index, batch = element.get_value()
        model.reset_metrics()
        model.forward_pass(batch, training=False)
        batch_states = tf.nest.flatten(model.report_local_unfinalized_metrics())
        row = tf.reshape(index, [1, 1])
        sums = tuple(tf.tensor_scatter_nd_add(total, row, state[tf.newaxis])
                     for total, state in zip(sums, batch_states))
        done += 1
      return sums, done

    self._run_batches = run_batches
    self._add_device_sums = add_device_sums

  def load(self, model_weights: tff.learning.models.ModelWeights) -> None:
    model_weights.assign_weights_to(self._model)

  def metrics_on(self, dataset: tf.data.Dataset, description: str = 'evaluating') -> dict[str, float]:
    self._model.reset_metrics()
    iterator = iter(dataset)
    with _progress(dataset, description) as bar:
      while True:
        done = int(self._run_batches(iterator, tf.constant(BATCHES_PER_CALL)))
        bar.update(done)
        if done < BATCHES_PER_CALL:
          break
    return self._runner.finalize(self._model)

  def metrics_per_device(self, indexed_batches: tf.data.Dataset, num_devices: int,
                         description: str = 'evaluating devices') -> tuple[list[dict[str, float]], dict[str, float]]:
    """(the metrics of each device 0..num_devices-1, the metrics of all their examples pooled) from (device
    index, batch) elements. The pooled metrics finalize the devices' summed states, so they equal one pass over
    the pooled examples up to the order of float additions (and `num_batches` counts each device's batches)."""
    sums = tuple(tf.zeros(tf.concat([[num_devices], tf.shape(value)], 0), value.dtype)
                 for value in tf.nest.flatten(self._model.report_local_unfinalized_metrics()))
    iterator = iter(indexed_batches)
    with _progress(indexed_batches, description) as bar:
      while True:
        sums, done = self._add_device_sums(iterator, sums, tf.constant(BATCHES_PER_CALL))
        bar.update(int(done))
        if int(done) < BATCHES_PER_CALL:
          break
    return self._runner.finalize_rows(self._model, sums), self._runner.finalize_total(self._model, sums)


class CentralizedEvaluator:
  """Evaluates model weights on one held-out dataset; returns the model's (renamed) metrics."""

  def __init__(self, model_fn, dataset: tf.data.Dataset, metric_names: dict[str, str]):
    self._runner = _MetricsRunner(model_fn, metric_names)
    self._dataset = dataset

  def __call__(self, model_weights: tff.learning.models.ModelWeights) -> dict[str, float]:
    scorer = self._runner.scorer()
    scorer.load(model_weights)
    return scorer.metrics_on(self._dataset, 'evaluating')


@dataclasses.dataclass(frozen=True)
class DeviceGroup:
  """Devices evaluated each on its own data: `preprocess` turns a device's raw data into batches; `weighted`
  says whether the group's distribution weights devices by their number of examples (training devices) or
  not (test devices)."""

  client_data: tff.simulation.datasets.ClientData
  preprocess: Callable[[tf.data.Dataset], tf.data.Dataset]
  weighted: bool


@dataclasses.dataclass(frozen=True)
class DeviceMetrics:
  """Per-device results of one group: ids, example counts, loss and (classification) error; and `pooled`, the
  model's metrics on all the group's examples together where every device was scored with the same weights
  (None where each device had its own model)."""

  device_ids: list
  num_examples: np.ndarray
  loss: np.ndarray
  error: Optional[np.ndarray]
  weighted: bool
  pooled: Optional[dict[str, float]] = None


def _device_metrics(device_ids: list, metrics: list[dict], weighted: bool,
                    pooled: Optional[dict[str, float]] = None) -> DeviceMetrics:
  """DeviceMetrics from each device's finalized metrics; error = 1 - accuracy where there is an accuracy.

  A device with no example gets NaN loss and error: neither is defined (Keras' division by a zero count
  would report loss 0 and accuracy 0).
  """
  accuracy = [m['accuracy'] for m in metrics] if metrics and 'accuracy' in metrics[0] else None
  num_examples = np.array([m['num_examples'] for m in metrics], np.float64)
  undefined = lambda values: np.where(num_examples > 0, values, np.nan)
  return DeviceMetrics(
      device_ids=device_ids,
      num_examples=num_examples,
      loss=undefined(np.array([m['loss'] for m in metrics], np.float64)),
      error=None if accuracy is None else undefined(1.0 - np.array(accuracy, np.float64)),
      weighted=weighted,
      pooled=pooled,
  )


def indexed_batches(group: DeviceGroup) -> tf.data.Dataset:
  """(device index, batch) of every device of `group`, device after device in `client_ids` order.

  One dataset for the whole group, built from the client data's `serializable_dataset_fn` inside a
  `flat_map`: no per-device dataset is built in Python (which costs tens of milliseconds per device). A
  device's batches are `group.preprocess` of its data alone, so no batch mixes two devices. A batch that is a
  tuple (`(x, y)`, as TFF's baseline tasks batch) stays one tuple.
  """
  client_ids = list(group.client_data.client_ids)
  dataset_of = group.client_data.serializable_dataset_fn
  indices_and_ids = tf.data.Dataset.from_tensor_slices(
      (tf.range(len(client_ids)), tf.constant(client_ids, tf.string))
  )
  return indices_and_ids.flat_map(
      lambda index, client_id: group.preprocess(dataset_of(client_id)).map(
          lambda *batch: (index, batch if len(batch) > 1 else batch[0])
      )
  )


class DeviceEvaluator:
  """Evaluates model weights on every device of each group separately, each group in one pass.

  Groups are named by the metric prefix they report under: 'train' (training devices, their own training
  data) and 'eval' (unseen test devices). Error is 1 - accuracy where the model has an 'accuracy' metric
  (after renaming by `metric_names`). Device weights are the `num_examples` metric that TFF's Keras models
  report, counted in the same pass.

  One traced loop runs over `indexed_batches` of a whole group: before each batch the model's metrics are
  reset, after it their unfinalized values (TFF's contract: states that sum across data, as
  `sum_then_finalize` sums them across clients) are added into row k of a [num_devices, ...] sum for the
  batch's device k (a segment sum over batches). Row k is then exactly the state that evaluating device k
  alone accumulates (the same float additions in the same order: 0 + batch 1 + batch 2 ...), and one TFF
  computation maps the model's own finalizers over the rows; the rows summed and finalized are the group's pooled
  metrics (`DeviceMetrics.pooled`). A device with no example has no batch: it
  reports num_examples 0 and NaN loss and error (`_device_metrics`), which `distribution_summary` counts as
  non-finite and leaves out.
  """

  def __init__(self, model_fn, groups: dict[str, DeviceGroup], metric_names: dict[str, str]):
    self._runner = _MetricsRunner(model_fn, metric_names)
    self._groups = groups
    self._datasets = {name: indexed_batches(group) for name, group in groups.items()}

  def __call__(self, model_weights: tff.learning.models.ModelWeights) -> dict[str, DeviceMetrics]:
    scorer = self._runner.scorer()
    scorer.load(model_weights)  # once: every device scores the same weights
    results = {}
    for name, dataset in self._datasets.items():
      device_ids = list(self._groups[name].client_data.client_ids)
      metrics, pooled = scorer.metrics_per_device(dataset, len(device_ids), f'evaluating {name} devices')
      results[name] = _device_metrics(device_ids, metrics, weighted=self._groups[name].weighted, pooled=pooled)
    return results


class PersonalEvaluator:
  """Evaluates each client's own model on its own held-out data (Fed+ Sec. 5.1: average test performance
  over parties), as the device group 'personal', unweighted across clients.

  Called with `weights_of(client_id) -> ModelWeights`: a personalisation algorithm's personal models, client
  by client; `one_model(model_weights)` scores the global model for every client (so global and personal
  algorithms are compared on the same footing) in one pass over all clients' batches, as `DeviceEvaluator`
  does (the same batches and float additions per client as client by client: the same metrics).
  """

  def __init__(self, model_fn, personal_test_data: tff.simulation.datasets.ClientData,
               metric_names: dict[str, str], batch_size: int = 256):
    self._runner = _MetricsRunner(model_fn, metric_names)
    self._client_ids = list(personal_test_data.client_ids)
    self._datasets = [(cid, personal_test_data.create_tf_dataset_for_client(cid).batch(batch_size))
                      for cid in self._client_ids]
    self._indexed_batches = indexed_batches(
        DeviceGroup(personal_test_data, lambda dataset: dataset.batch(batch_size), weighted=False))

  def one_model(self, model_weights: tff.learning.models.ModelWeights) -> dict[str, DeviceMetrics]:
    """The 'personal' group with `model_weights` for every client."""
    scorer = self._runner.scorer()
    scorer.load(model_weights)
    metrics, pooled = scorer.metrics_per_device(self._indexed_batches, len(self._client_ids), 'evaluating clients')
    return {'personal': _device_metrics(self._client_ids, metrics, weighted=False, pooled=pooled)}

  def __call__(self, weights_of: Callable[[str], tff.learning.models.ModelWeights],
               group: str = 'personal') -> dict[str, DeviceMetrics]:
    """The device group `group` with each client's own model `weights_of(client_id)`."""
    scorer, metrics = self._runner.scorer(), []
    for cid, dataset in self._datasets:
      scorer.load(weights_of(cid))
      metrics.append(scorer.metrics_on(dataset))
    return {group: _device_metrics([cid for cid, _ in self._datasets], metrics, weighted=False)}


def distribution_summary(results: dict[str, DeviceMetrics]) -> dict[str, float]:
  """{'<group>/<metric>_mean', '<group>/<metric>_p<tau>'} for metric in (loss, error), tau in PERCENTILES."""
  summary = collections.OrderedDict()
  for group, metrics in results.items():
    weights = metrics.num_examples if metrics.weighted else np.ones_like(metrics.num_examples)
    for metric_name, values in (('loss', metrics.loss), ('error', metrics.error)):
      if values is None or not len(values):
        continue
      finite = np.isfinite(values)
      summary[f'{group}/{metric_name}_num_nonfinite'] = int(np.count_nonzero(~finite))
      summary[f'{group}/{metric_name}_mean'] = (
          float(np.average(values[finite], weights=weights[finite])) if finite.any() else float('nan')
      )
      for tau in PERCENTILES:
        summary[f'{group}/{metric_name}_p{tau}'] = (
            superquantile.weighted_quantile(values[finite], weights[finite], tau / 100)
            if finite.any() else float('nan')
        )
  return summary


def split_honest_and_corrupted(
    group: str, metrics: DeviceMetrics, corrupted_ids: Collection[str]
) -> dict[str, DeviceMetrics]:
  """{'<group>_honest': the devices not in `corrupted_ids`, '<group>_corrupted': those in it} of one group.

  For `distribution_summary` of each part, e.g. the personal models of the clients a corruption chose and of
  the others. A part with no device is left out.
  """
  inside = np.array([device_id in corrupted_ids for device_id in metrics.device_ids], bool)
  parts = collections.OrderedDict()
  for name, mask in ((f'{group}_honest', ~inside), (f'{group}_corrupted', inside)):
    if mask.any():
      parts[name] = DeviceMetrics(
          device_ids=[device_id for device_id, keep in zip(metrics.device_ids, mask) if keep],
          num_examples=metrics.num_examples[mask], loss=metrics.loss[mask],
          error=None if metrics.error is None else metrics.error[mask], weighted=metrics.weighted,
      )
  return parts


def device_rows(results: dict[str, DeviceMetrics]) -> list[dict]:
  """One row per device (group, device_id, num_examples, loss, error) for a CSV of the final model."""
  rows = []
  for group, metrics in results.items():
    for index, device_id in enumerate(metrics.device_ids):
      rows.append(collections.OrderedDict(
          group=group, device_id=device_id, num_examples=int(metrics.num_examples[index]),
          loss=float(metrics.loss[index]),
          error=float('nan') if metrics.error is None else float(metrics.error[index]),
      ))
  return rows

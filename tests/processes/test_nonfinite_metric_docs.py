"""The robust aggregation guide's section "What RFA reports and accepts" (docs/guides/robust_aggregation.md) names the metric that counts NaN/Inf client updates: a NaN client in RFA
and in a `build_weighted_fed_avg`-style process with our aggregator is counted exactly there."""

import collections
import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust import aggregators
from tff_robust import processes
from tests.processes import small_model

_GUIDE = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'guides' / 'robust_aggregation.md'


def _readme_bullets(section: str) -> list[str]:
  """The bullets ('- ' lines and their indented continuations) of the guide's section `section`, joined."""
  text = _GUIDE.read_text().split(f'\n## {section}\n', 1)[1].split('\n## ', 1)[0]
  return [' '.join(bullet.split()) for bullet in re.split(r'\n- ', text)[1:]]


def _nan_bullet() -> str:
  (bullet,) = [b for b in _readme_bullets('What RFA reports and accepts') if b.startswith('Client updates with NaN/Inf')]
  return bullet


def _count_of(flat_metrics, name):
  """{path: count} of the metric `name`: a full path, or a bare name wherever it occurs."""
  return {path: int(value) for path, value in flat_metrics.items() if path == name or path.endswith('/' + name)}


def _flatten(metrics, prefix=''):
  for name, value in metrics.items():
    if isinstance(value, collections.abc.Mapping):
      yield from _flatten(value, f'{prefix}{name}/')
    else:
      yield f'{prefix}{name}', value


def _client_dataset(seed, nan=False):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(8, small_model.NUM_FEATURES)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  if nan:
    x[3, 1] = np.nan
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(4)


_SGD = tff.learning.optimizers.build_sgdm(learning_rate=0.1)


@pytest.mark.parametrize('builder', [
    lambda: processes.build_rfa_process(small_model.model_fn, _SGD),
    lambda: processes.build_fed_avg_process(
        small_model.model_fn, _SGD, model_aggregator=aggregators.GeometricMedianFactory()
    ),
], ids=['build_rfa_process', 'build_fed_avg_process_with_geometric_median'])
def test_a_nan_client_is_counted_in_the_metric_the_readme_names(builder):
  counted_in = re.match(r'Client updates with NaN/Inf [^`]* counted in `([^`]+)`', _nan_bullet())
  assert counted_in, 'the guide names no metric that counts NaN/Inf client updates'
  stays_zero = re.search(r'`([^`]+)` counts only non-finite values that reach\s+the aggregator', _nan_bullet())
  process = builder()
  cohort = [_client_dataset(1), _client_dataset(2, nan=True), _client_dataset(3)]
  output = process.next(process.initialize(), cohort)
  flat = dict(_flatten(output.metrics))
  counts = _count_of(flat, counted_in.group(1))
  assert counts and set(counts.values()) == {1}, counts
  if stays_zero:  # the guide's second statement: the aggregator never saw the client TFF's client work dropped
    assert set(_count_of(flat, stays_zero.group(1)).values()) == {0}
  weights = np.concatenate([np.ravel(w) for w in process.get_model_weights(output.state).trainable])
  assert np.all(np.isfinite(weights))

"""Weighted quantile of scalar client values by a B-ary search of secure histograms (notes, section 2.6).

`SecureHistogramQuantileFactory` finds the weighted `level`-quantile q ('upper' end of a tied interval, as
`quantile.exact_quantile_factory`) in `num_passes` calls of an inner weighted-mean process, each on the
bounded per-client vector (1, [x_k < e_0], ..., [x_k < e_B]) in {0, 1}^(B+2): the mean is
(1, G(e_0) / W, ..., G(e_B) / W), G(t) = sum_{x_k < t} alpha_k, and q >= e_j exactly when G(e_j) <= tau W.
Each pass keeps the bin [e_j*, e_j*+1) of q and splits it into B bins for the next; the edges are uniform in
asinh(x), starting from [-T, T], T = asinh(largest finite value). See `tff_robust.core.histogram_quantile`
(the NumPy reference) for the maths. No client value leaves a client: the server sees B + 1 weighted shares.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import inner_measurements
from tff_robust.aggregators import type_checks
from tff_robust.aggregators import widening
from tff_robust.core import histogram_quantile
from tff_robust.core import superquantile

DEFAULT_NUM_BINS = 256


class SecureHistogramQuantileFactory(tff.aggregators.WeightedAggregationFactory):
  """Weighted `level`-quantile of scalar client values from `num_passes` secure histograms of `num_bins` bins.

  The result is the lower edge eta of the last pass's bin of the exact quantile q: eta <= q < eta + bin_width,
  with bin_width <= sinh-image of 2T / B^P in asinh(x) (float32, B = 256: 0.27% of |q| for |q| > 1, 0.0027
  absolute below, after 2 passes). The filter {x_k >= eta} equals {x_k >= q} unless another value lies in
  [eta, q). A cohort with no positive weight gives 0.

  State: the inner mean process's state only (every call starts from [-T, T]).

  Measurements:
    - `secure_average_calls`: inner weighted-mean calls (= `num_passes`).
    - `tolerance`: 0, as `quantile.SecureQuantileFactory`'s: the filter `x >= result - tolerance` keeps q.
    - `bin_width`: width of the last bin (q in [result, result + bin_width)); 0 with no positive weight.
    - `num_nonfinite_clients`: clients whose value or weight was not finite or whose weight was negative (they get
      weight 0).
    - `mean`: measurements of the last inner mean call (absent when empty, as TFF's `MeanFactory`'s are).

  Types: a floating scalar value of any width and a floating or integer scalar weight. The search runs in
  float32 (float64 with a float64 value or weight), `mean_factory` is created for a vector of that dtype,
  and the result has the value's dtype.
  """

  def __init__(
      self,
      level: float,
      num_passes: int = 2,
      num_bins: int = DEFAULT_NUM_BINS,
      mean_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
      count_factory: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
  ):
    """Initializes the factory.

    Args:
      level: the quantile level tau in [0, 1] (Delta-FL uses tau = 1 - theta).
      num_passes: histogram passes (secure-average calls) per aggregation, an integer >= 1.
      num_bins: bins per pass B, an integer >= 2; each client sends B + 2 numbers per pass.
      mean_factory: a `tff.aggregators.WeightedAggregationFactory` for every pass, e.g. a
        `SecureSumFactory`-backed `MeanFactory` (the entries are in [0, 1], so the weighted entries that its
        value sum receives are in [0, largest weight]); defaults to
        `tff.aggregators.MeanFactory(no_nan_division=True)`.
      count_factory: a `tff.aggregators.UnweightedAggregationFactory` summing the int32 0/1 non-finite flags;
        defaults to `tff.aggregators.SumFactory()`. Secure: `tff.aggregators.SecureSumFactory(1, 0)`.

    Raises:
      TypeError: if `mean_factory` is not a weighted aggregation factory.
      ValueError: if an argument is outside its allowed range.
    """
    self._level = type_checks.check_number('level', level, minimum=0.0, maximum=1.0)
    self._num_passes = type_checks.check_integer('num_passes', num_passes, minimum=1)
    self._num_bins = type_checks.check_integer('num_bins', num_bins, minimum=2)
    self._mean_factory = type_checks.mean_factory_or_default(mean_factory)
    self._count_factory = type_checks.sum_factory_or_default(count_factory, 'count_factory')

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:
    """The `tff.templates.AggregationProcess` of this factory for `value_type, weight_type` (TFF's `create`): the
    computation, state and measurements the class docstring describes. `value_type` must be a float scalar."""
    type_checks.check_float_scalar('value_type', value_type)
    type_checks.check_weight_type(weight_type)
    dtype = widening.scalar_dtype(value_type, weight_type)
    num_bins, num_passes = self._num_bins, self._num_passes
    scalar_type, range_type = tff.TensorType(dtype), tff.TensorType(dtype, [2])
    mean_process = self._mean_factory.create(tff.TensorType(dtype, [num_bins + 2]), scalar_type)
    count_process = self._count_factory.create(tff.TensorType(np.int32))
    limit = histogram_quantile.asinh_limit(dtype)
    fractions = (np.arange(num_bins + 1) / num_bins).astype(dtype)
    tolerance = superquantile.TIE_TOLERANCE
    target = np.asarray(min(self._level + tolerance, 1.0 - tolerance), dtype)

    def edges(t_range):
      """(t, sinh(t)): t_j = min(low + (high - low) j / B, high), t_B = high (`core.histogram_quantile`)."""
      low, high = t_range[0], t_range[1]
      t = tf.minimum(low + (high - low) * fractions, high)
      t = tf.concat([t[:-1], high[tf.newaxis]], axis=0)
      return t, tf.sinh(t)

    @tff.tensorflow.computation(widening.wide_value_type(value_type), range_type)
    def indicators(value, t_range):
      """(1, [x_k < e_0], ..., [x_k < e_B])."""
      below = tf.cast(tf.cast(value, dtype) < edges(t_range)[1], dtype)
      return tf.concat([tf.ones([1], dtype), below], axis=0)

    @tff.tensorflow.computation(tff.TensorType(dtype, [num_bins + 2]), range_type)
    def search_step(means, t_range):
      """(range of the next pass [t_j*, t_j*+1], (e_j*, e_j*+1), whether some weight was positive)."""
      count = tf.reduce_sum(tf.cast(means[1:] <= target, tf.int32))
      j = tf.clip_by_value(count - 1, 0, num_bins - 1)
      t, e = edges(t_range)
      return tf.stack([t[j], t[j + 1]]), tf.stack([e[j], e[j + 1]]), means[0] > 0.5

    @tff.tensorflow.computation(range_type, tff.TensorType(np.bool_))
    def finish(bin_edges, positive):
      """(eta, bin width), or (0, 0) if no weight was positive; eta >= the value dtype's lowest finite."""
      lower = tf.maximum(bin_edges[0], tf.cast(np.finfo(value_type.dtype).min, dtype))
      zero = tf.zeros([], dtype)
      return (
          tf.cast(tf.where(positive, lower, zero), value_type.dtype),
          tf.where(positive, bin_edges[1] - lower, zero),
      )

    @tff.federated_computation()
    def init_fn():
      return mean_process.initialize()

    @widening.sanitized_next_computation(init_fn, value_type, weight_type)
    def next_fn(state, value, weight, nonfinite):
      t_range = tff.federated_value(np.asarray([-limit, limit], dtype), tff.SERVER)
      for _ in range(num_passes):
        client_indicators = tff.federated_map(indicators, (value, tff.federated_broadcast(t_range)))
        output = mean_process.next(state, client_indicators, weight)
        state = output.state
        t_range, bin_edges, positive = tff.federated_map(search_step, (output.result, t_range))
      result, bin_width = tff.federated_map(finish, (bin_edges, positive))
      measurements = inner_measurements.with_inner(collections.OrderedDict(
          secure_average_calls=tff.federated_value(num_passes, tff.SERVER),
          tolerance=tff.federated_value(np.zeros([], dtype), tff.SERVER),
          bin_width=bin_width,
          num_nonfinite_clients=count_process.next(count_process.initialize(), nonfinite).result,
      ), 'mean', output.measurements)
      return tff.templates.MeasuredProcessOutput(
          state=state, result=result, measurements=tff.federated_zip(measurements)
      )

    return tff.templates.AggregationProcess(init_fn, next_fn)

"""TensorFlow versions of the gather-based robust rules of `tff_robust.core.robust_statistics`.

Each rule takes the gathered client points `points` [m, d] (float32) and weights [m] with a dynamic m and
returns the aggregate [d]; `minimum_points(m)` says how many points the rule needs. The NumPy references
define the semantics, ties included: Krum selections break exact score ties by centrality, then the point's
lexicographic order, then its weight (`robust_statistics.krum_order`), so every rule is a function of the cohort
as a multiset, whatever the order in which TFF delivers the clients.
"""

import tensorflow as tf


def _weighted_column_mean(values, weights):
  total = tf.reduce_sum(weights, axis=0)
  safe_total = tf.where(total > 0, total, tf.ones_like(total))
  return tf.where(total > 0, tf.reduce_sum(values * weights, axis=0) / safe_total, tf.zeros_like(total))


def coordinate_median(points, weights):
  """Per-coordinate weighted median: midpoint of the lower and upper weighted medians."""
  order = tf.argsort(points, axis=0, stable=True)
  sorted_points = _take_along_columns(points, order)
  sorted_weights = tf.gather(weights, order)
  half = tf.reduce_sum(weights) / 2 * (1 - 1e-6)
  below = tf.cumsum(sorted_weights, axis=0)
  above = tf.cumsum(sorted_weights, axis=0, reverse=True)
  lower = tf.argmax(tf.cast(below >= half, tf.int32), axis=0, output_type=tf.int32)
  m = tf.shape(points, out_type=tf.int32)[0]
  upper = m - 1 - tf.argmax(tf.cast(tf.reverse(above >= half, [0]), tf.int32), axis=0, output_type=tf.int32)
  return (_pick_per_column(sorted_points, lower) + _pick_per_column(sorted_points, upper)) / 2


def coordinate_upper_quantile(points, weights, level, tie_tolerance):
  """Per coordinate, the 'upper' weighted `level`-quantile of `core.superquantile.weighted_quantile`:
  the smallest sorted value whose cumulative weight exceeds level * W (+ tie_tolerance * W), or the
  largest value if none does. Cumulative weights are summed in float64."""
  order = tf.argsort(points, axis=0, stable=True)
  sorted_points = _take_along_columns(points, order)
  cumulative = tf.cumsum(tf.gather(tf.cast(weights, tf.float64), order), axis=0)
  total = cumulative[-1]
  reached = cumulative > (level + tie_tolerance) * total
  m = tf.shape(points, out_type=tf.int32)[0]
  index = tf.where(
      tf.reduce_any(reached, axis=0),
      tf.argmax(tf.cast(reached, tf.int32), axis=0, output_type=tf.int32),
      tf.fill(tf.shape(total), m - 1),
  )
  return _pick_per_column(sorted_points, index)


def trimmed_mean_count(m, trim_fraction):
  """k = ceil(trim_fraction * m), the number of values the trimmed mean drops at each end (int32; the 1e-12 keeps an
  exact product from rounding up)."""
  return tf.cast(tf.math.ceil(trim_fraction * tf.cast(m, tf.float64) - 1e-12), tf.int32)


def coordinate_trimmed_mean(points, weights, trim_fraction):
  """Per coordinate, the weighted mean after dropping the k = ceil(trim_fraction * m) extremes at each end."""
  m = tf.shape(points, out_type=tf.int32)[0]
  k = trimmed_mean_count(m, trim_fraction)
  order = tf.argsort(points, axis=0, stable=True)[k:m - k]
  return _weighted_column_mean(_take_along_columns(points, order), tf.gather(weights, order))


def pairwise_squared_distances(points):
  """D_ij = ||p_i - p_j||^2 in float64, exactly symmetric (D_ij and D_ji equal bit for bit).

  The Gram form ||p_i||^2 + ||p_j||^2 - 2 <p_i, p_j> (one matrix product, no [m, m, d] tensor of
  differences) is taken on the points minus their coordinate-wise lower median, so a common offset does not
  cancel away the distances' digits, and symmetrised, (D + D^T) / 2: the two Krum scores of mutual nearest
  neighbours with one neighbour are then the same number, and the tie-break decides, as in the NumPy
  reference. The median, unlike a mean, is one of the values whatever the clients' order: points on a grid
  (e.g. integers) keep exact distances, so exact ties between different pairs stay exact.
  """
  points = tf.cast(points, tf.float64)
  m = tf.shape(points)[0]
  points = points - tf.sort(points, axis=0)[(m - 1) // 2]
  squared_norms = tf.reduce_sum(tf.square(points), axis=1)
  gram = tf.matmul(points, points, transpose_b=True)
  distances = squared_norms[:, None] + squared_norms[None, :] - 2 * gram
  return tf.maximum((distances + tf.transpose(distances)) / 2, 0.0)


def _krum_scores_and_totals(distances, active, num_byzantine):
  """([m] Krum scores over max(1, r - f - 2) neighbours, [m] sums of squared distances to every other point),
  both among the r `active` points and summed in sorted order (equal distances, equal sums); inactive: +inf."""
  m = tf.shape(distances)[0]
  pair_active = tf.logical_and(active[:, None], active[None, :])
  pair_active = tf.logical_and(pair_active, tf.logical_not(tf.eye(m, dtype=tf.bool)))
  nearest = tf.sort(tf.where(pair_active, distances, tf.constant(float('inf'), tf.float64)), axis=1)
  neighbours = tf.maximum(tf.reduce_sum(tf.cast(active, tf.int32)) - num_byzantine - 2, 1)
  use = tf.range(m)[None, :] < neighbours
  scores = tf.reduce_sum(tf.where(use, nearest, tf.zeros_like(nearest)), axis=1)
  totals = tf.reduce_sum(tf.sort(tf.where(pair_active, distances, tf.zeros_like(distances)), axis=1), axis=1)
  inactive = tf.constant(float('inf'), tf.float64)
  return tf.where(active, scores, inactive), tf.where(active, totals, inactive)


def lexicographic_ranks(points):
  """[m] int32: the number of rows of `points` [m, d] that precede row i in lexicographic order (the first
  coordinate that differs decides); equal rows share a rank. One [m, d] comparison per row."""

  def rank_of(row):
    differs = tf.not_equal(points, row)
    first = tf.argmax(tf.cast(differs, tf.int32), axis=1, output_type=tf.int32)  # first differing coordinate
    smaller = tf.gather(points, first[:, None], batch_dims=1)[:, 0] < tf.gather(row, first)
    return tf.reduce_sum(tf.cast(tf.logical_and(tf.reduce_any(differs, axis=1), smaller), tf.int32))

  return tf.map_fn(rank_of, points, fn_output_signature=tf.int32)


def _tie_ranks(points, weights):
  """[m] int32, a permutation of 0..m-1: each row's place in (point lexicographically, weight) order, the last
  tie-breaks of `robust_statistics.krum_order` (rows equal in both are interchangeable)."""
  by_weight = tf.argsort(weights, stable=True)
  order = tf.gather(by_weight, tf.argsort(tf.gather(lexicographic_ranks(points), by_weight), stable=True))
  return tf.math.invert_permutation(order)


def _krum_order(scores, totals, tie_ranks):
  """The row indices in `robust_statistics.krum_order`: by score, ties by total squared distance, then tie rank."""
  order = tf.math.invert_permutation(tie_ranks)
  order = tf.gather(order, tf.argsort(tf.gather(totals, order), stable=True))
  return tf.gather(order, tf.argsort(tf.gather(scores, order), stable=True))


def krum_scores(points, num_byzantine):
  """Every point's Krum score over max(1, m - f - 2) neighbours (`robust_statistics.krum_scores`)."""
  m = tf.shape(points, out_type=tf.int32)[0]
  return _krum_scores_and_totals(pairwise_squared_distances(points), tf.ones([m], tf.bool), num_byzantine)[0]


def multi_krum(points, weights, num_byzantine, num_selected=None):
  """Weighted mean of the `num_selected` (default m - f) points first in Krum order (lowest Krum scores)."""
  m = tf.shape(points, out_type=tf.int32)[0]
  scores, totals = _krum_scores_and_totals(pairwise_squared_distances(points), tf.ones([m], tf.bool), num_byzantine)
  count = m - num_byzantine if num_selected is None else tf.minimum(num_selected, m)
  selected = _krum_order(scores, totals, _tie_ranks(points, weights))[:count]
  chosen_weights = tf.gather(weights, selected)
  return _weighted_column_mean(tf.gather(points, selected), chosen_weights[:, None])


def bulyan(points, weights, num_byzantine):
  """Bulyan: repeated-Krum selection of m - 2f points, then per coordinate the weighted mean of the
  m - 4f selected values closest to their median (`robust_statistics.bulyan`: each Krum step takes the first
  of the r remaining points in Krum order, scores over max(1, r - f - 2) neighbours)."""
  m = tf.shape(points, out_type=tf.int32)[0]
  distances = pairwise_squared_distances(points)
  theta = m - 2 * num_byzantine
  tie_ranks = _tie_ranks(points, weights)

  def select_one(step, active, selected):
    scores, totals = _krum_scores_and_totals(distances, active, num_byzantine)
    last = tf.logical_and(active, tf.equal(tf.reduce_sum(tf.cast(active, tf.int32)), 1))  # scores 0, not +inf
    scores = tf.where(last, tf.zeros_like(scores), scores)
    best = _krum_order(scores, totals, tie_ranks)[0]  # inactive points score +inf, after every active one
    return step + 1, tf.tensor_scatter_nd_update(active, [[best]], [False]), selected.write(step, best)

  _, _, selected = tf.while_loop(
      lambda step, *_: step < theta, select_one,
      (tf.constant(0), tf.ones([m], tf.bool), tf.TensorArray(tf.int32, size=theta)),
  )
  selected = selected.stack()
  chosen, chosen_weights = tf.gather(points, selected), tf.gather(weights, selected)
  sorted_chosen = tf.sort(chosen, axis=0)
  median = (sorted_chosen[(theta - 1) // 2] + sorted_chosen[theta // 2]) / 2
  beta = theta - 2 * num_byzantine
  closest = tf.argsort(tf.abs(chosen - median), axis=0, stable=True)[:beta]
  return _weighted_column_mean(_take_along_columns(chosen, closest), tf.gather(chosen_weights, closest))


def _take_along_columns(values, row_indices):
  """values[row_indices[r, c], c] for every r, c (NumPy's take_along_axis on axis 0)."""
  return tf.transpose(tf.gather(tf.transpose(values), tf.transpose(row_indices), batch_dims=1))


def _pick_per_column(values, row_index):
  return tf.gather(tf.transpose(values), row_index[:, None], batch_dims=1)[:, 0]

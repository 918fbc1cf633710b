"""Nearest-neighbour mixing (NNM; Allouah et al., AISTATS 2023, "Fixing by mixing"), before a gather-based rule.

NOT secure-aggregation compatible: NNM needs every pair of client updates, so it gathers them
(`gathering.GatheringRobustFactory`, `tff.federated_aggregate`), and `privacy.non_secure_intrinsics` names
that gathering. A simulation baseline for heterogeneous clients, beside the secure `BucketingFactory`.

Algorithm 1 of the paper: with n gathered points and f the number of Byzantine clients tolerated, every point
x_i is replaced by the plain average of its n - f nearest neighbours in L2 (itself included; ties to the
lower index), then the robust rule F runs on the mixed points with the clients' weights. The mixing is
unweighted, as in the paper.
"""

import tensorflow as tf

from tff_robust.aggregators import gathering
from tff_robust.aggregators import robust_rules
from tff_robust.aggregators import type_checks


def mix(points, num_byzantine: int):
  """TensorFlow: row i of `points` [m, d] replaced by the mean of its m - f nearest rows (itself first)."""
  distances = robust_rules.pairwise_squared_distances(points)
  distances = tf.linalg.set_diag(distances, -tf.ones_like(tf.linalg.diag_part(distances)))  # itself first
  num_neighbors = tf.shape(points)[0] - num_byzantine
  _, nearest = tf.math.top_k(-distances, k=num_neighbors)  # equal distances: the lower index first
  return tf.reduce_mean(tf.gather(points, nearest), axis=1)


def nearest_neighbor_mixing_factory(
    num_byzantine: int, then: gathering.GatheringRobustFactory
) -> gathering.GatheringRobustFactory:
  """NNM with f = `num_byzantine`, then the gather-based rule `then` (e.g. `baselines.coordinate_median_factory()`).

  Needs m > f usable clients and whatever `then` needs.

  Raises:
    ValueError: if `num_byzantine` is not an integer >= 0.
    TypeError: if `then` is not a `gathering.GatheringRobustFactory`.
  """
  num_byzantine = type_checks.check_integer('num_byzantine', num_byzantine, minimum=0)
  if not isinstance(then, gathering.GatheringRobustFactory):
    raise TypeError(f'then must be a gathering.GatheringRobustFactory, got {then!r}')
  return gathering.GatheringRobustFactory(
      f'nnm_{then.name}',
      lambda points, weights: then.rule(mix(points, num_byzantine), weights),
      lambda m: tf.logical_and(m > num_byzantine, then.accepts_num_clients(m)),
      f'more than num_byzantine = {num_byzantine} clients and {then.requirement}',
  )

"""Inner-product manipulation (Xie, Koyejo, Gupta, "Fall of empires", UAI 2019 / PMLR 115, 2020): every corrupted
client sends -eps mu, mu the honest weighted mean. Karimireddy, He, Jaggi (ICML 2021; ICLR 2022) use eps = 0.1,
our default; Xie et al. study several eps (small ones against Krum-like rules, large ones against the median);
Blades' default is 0.5, ByzFL's 2. NumPy reference: `tff_robust.core.attacks.directions.ipm_target`. Knows: the
round's honest updates and weights (through federated sums).
"""

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators.attacks import base
from tff_robust.aggregators.attacks import honest_sums


class IpmAttack(base.UpdateAttack):
  """Inner-product manipulation as an `UpdateAttack`: every corrupted client sends -eps mu."""

  def __init__(self, eps: float):
    self._eps = float(eps)

  def build(self, update_type, weight_type, seed: int):
    """The corrupt function: the honest weighted mean mu by federated sums, then -eps mu broadcast to the corrupted
    clients."""
    del seed
    eps = self._eps

    @tff.tensorflow.computation(update_type)
    def ipm_target(mean):
      return tf.nest.map_structure(lambda m: -eps * m, mean)

    def corrupt(update, corrupted, weight, round_num, previous):
      del round_num, previous
      sums = honest_sums.sums(update_type, weight_type, update, corrupted, weight)
      mean = honest_sums.mean(update_type, weight_type, sums['honest_sum'], sums['honest_weight'])
      return base.replace_with_target(update_type, update, corrupted, tff.federated_map(ipm_target, mean))

    return corrupt

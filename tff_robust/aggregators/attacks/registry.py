"""Every simulated update attack by name: `build(spec)` makes the `UpdateAttack` of an attack spec.

Names, parameters and defaults live in `tff_robust.core.attacks.catalog` (no TensorFlow, so that the runner checks
them before loading it); this module maps each name to its implementation, one module per attack:

| name | module | knows |
|---|---|---|
| gaussian | `gaussian` | its own update |
| omniscient | `omniscient` | the round's updates and weights (federated sums) |
| alie | `alie` | the honest updates' mean and std, the corrupted count |
| ipm | `ipm` | the honest updates' mean |
| sign_flipping | `sign_flipping` | its own update |
| norm_aware | `norm_aware` | the honest updates; the defence's norm bound through c |
| min_max, min_sum | `perturbation_search` | the honest updates |
| fang_trimmed_mean | `fang_trimmed_mean` | the honest updates |
| fang_krum | `fang_krum` | the honest updates; that the defence is Krum with f = the corrupted count |
| mimic | `mimic` | the honest updates |
| rop | `rop` | the honest mean, the previous aggregate; centered clipping's radius through `radius` |
| line_search | `line_search` | the honest updates, the previous aggregate and the defence's `StackedRule` |
| boost | `boost` | its own update, the cohort's weights, the server learning rate (through `eta`) |
| masked | `masked` | its own update, the previous aggregate (the last global update) |

The gathered attacks (all but the first five, boost and masked) gather every update at the server with `federated_aggregate`.
"""

from typing import Optional

from tff_robust.aggregators.attacks import alie
from tff_robust.aggregators.attacks import base
from tff_robust.aggregators.attacks import boost
from tff_robust.aggregators.attacks import fang_krum
from tff_robust.aggregators.attacks import fang_trimmed_mean
from tff_robust.aggregators.attacks import gaussian
from tff_robust.aggregators.attacks import ipm
from tff_robust.aggregators.attacks import line_search
from tff_robust.aggregators.attacks import masked
from tff_robust.aggregators.attacks import mimic
from tff_robust.aggregators.attacks import norm_aware
from tff_robust.aggregators.attacks import omniscient
from tff_robust.aggregators.attacks import perturbation_search
from tff_robust.aggregators.attacks import rop
from tff_robust.aggregators.attacks import sign_flipping
from tff_robust.core.attacks import catalog

ATTACK_NAMES = catalog.ATTACK_NAMES

_BUILDERS = {
    'gaussian': lambda o, rule: gaussian.GaussianAttack(o['mode']),
    'omniscient': lambda o, rule: omniscient.OmniscientAttack(),
    'alie': lambda o, rule: alie.AlieAttack(o['z']),
    'ipm': lambda o, rule: ipm.IpmAttack(o['eps']),
    'sign_flipping': lambda o, rule: sign_flipping.SignFlippingAttack(),
    'norm_aware': lambda o, rule: norm_aware.NormAwareAttack(o['direction'], o['c']),
    'min_max': lambda o, rule: perturbation_search.PerturbationSearchAttack(
        'min_max', o['direction'], o['gamma_init'], o['tau']),
    'min_sum': lambda o, rule: perturbation_search.PerturbationSearchAttack(
        'min_sum', o['direction'], o['gamma_init'], o['tau']),
    'fang_trimmed_mean': lambda o, rule: fang_trimmed_mean.FangTrimmedMeanAttack(o['b']),
    'fang_krum': lambda o, rule: fang_krum.FangKrumAttack(o['threshold']),
    'mimic': lambda o, rule: mimic.MimicAttack(),
    'rop': lambda o, rule: rop.RopAttack(o['radius'], o['pi'], o['lam'], o['angle']),
    'line_search': lambda o, rule: line_search.LineSearchAttack(
        rule, o['direction'], o['max_scale'], int(o['grid']), int(o['refinements'])),
    'boost': lambda o, rule: boost.BoostAttack(o['gamma'], o['eta']),
    'masked': lambda o, rule: masked.MaskedAttack(o['top']),
}


def build(spec, *, stacked_rule: Optional[base.StackedRule] = None) -> base.UpdateAttack:
  """The attack of `spec` (a string such as 'alie(z=1)' or a `catalog.AttackSpec`).

  Raises:
    ValueError: for a spec `catalog.parse` refuses, or an attack that evaluates the defence (line_search)
      without `stacked_rule`.
  """
  spec = catalog.parse(spec)
  if spec.info.needs_stacked_rule and stacked_rule is None:
    raise ValueError(f'attack {str(spec)!r} evaluates the defence: it needs the defence\'s stacked rule')
  return _BUILDERS[spec.name](spec.options(), stacked_rule)

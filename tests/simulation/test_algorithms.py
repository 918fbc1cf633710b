"""`algorithms.process_draws_from_seed`: what the robustness sweep builds per seed."""

from tff_robust.simulation import algorithms


def test_a_process_draws_from_its_seed_with_a_noisy_defence_a_random_attack_or_a_noisy_uplink():
  """Every other process is shared by a sweep's seeds (the attacks' own check: tests/aggregators/test_attacks.py)."""
  plain, noisy = algorithms.AlgorithmConfig(), algorithms.AlgorithmConfig(defence='norm_filter(k=2)>weak_dp')
  assert algorithms.process_draws_from_seed('fedavg', noisy, None)
  assert algorithms.process_draws_from_seed('fedavg', plain, 'gaussian')
  assert algorithms.process_draws_from_seed('fedavg', plain, 'fang_trimmed_mean(b=3)')
  assert not algorithms.process_draws_from_seed('fedavg', plain, 'ipm(eps=2)')
  assert not algorithms.process_draws_from_seed('fedavg', algorithms.AlgorithmConfig(defence='gm'), None)
  assert algorithms.process_draws_from_seed('signsgd', algorithms.AlgorithmConfig(channel='rayleigh'), None)
  assert not algorithms.process_draws_from_seed('mtfeel', plain, None)  # the error-free channel draws nothing

"""`algorithms.defence_or_attack_draws_from_seed`: what the robustness sweep builds per seed."""

from tff_robust.simulation import algorithms


def test_a_process_draws_from_its_seed_with_a_noisy_defence_or_a_random_attack():
  """Every other process is shared by a sweep's seeds (the attacks' own check: tests/aggregators/test_attacks.py)."""
  plain, noisy = algorithms.AlgorithmConfig(), algorithms.AlgorithmConfig(defence='norm_filter(k=2)>weak_dp')
  assert algorithms.defence_or_attack_draws_from_seed(noisy, None)
  assert algorithms.defence_or_attack_draws_from_seed(plain, 'gaussian')
  assert algorithms.defence_or_attack_draws_from_seed(plain, 'fang_trimmed_mean(b=3)')
  assert not algorithms.defence_or_attack_draws_from_seed(plain, 'ipm(eps=2)')
  assert not algorithms.defence_or_attack_draws_from_seed(algorithms.AlgorithmConfig(defence='gm'), None)

"""The arithmetic of section 5 of benchmarks.scaling on made-up measurements (benchmarks are never timed in tests)."""

import pytest

from benchmarks import pass_cost_fit


def test_linear_fit_recovers_fixed_and_per_pass_cost():
  fixed, per_pass = pass_cost_fit.linear_fit([1, 10, 30], [0.25 + 0.007 * n for n in (1, 10, 30)])
  assert fixed == pytest.approx(0.25) and per_pass == pytest.approx(0.007)


@pytest.mark.parametrize('fixed, per_pass, expected', [
    (0.25, 0.007, '7'),     # 1.5 x 0.2 = 0.30: room 0.05 = 7 passes of 7 ms (7.14)
    (0.30, 0.007, '0'),     # exactly at the aim with no pass
    (0.31, 0.007, 'none'),  # over the aim before any pass
    (0.25, 0.0, 'any'),     # passes that cost nothing
])
def test_passes_within_the_aim(fixed, per_pass, expected):
  assert pass_cost_fit.passes_within(1.5, 0.2, fixed, per_pass) == expected


@pytest.mark.parametrize('passes, seconds', [([1, 1, 1], [0.3, 0.3, 0.3]), ([1, 10], [0.3])])
def test_linear_fit_refuses_fewer_than_two_pass_counts_or_unpaired_seconds(passes, seconds):
  with pytest.raises(ValueError, match='at least 2 distinct pass counts'):
    pass_cost_fit.linear_fit(passes, seconds)


@pytest.mark.parametrize('aim, baseline', [(0.0, 0.2), (1.5, 0.0)])
def test_passes_within_refuses_a_non_positive_aim_or_baseline(aim, baseline):
  with pytest.raises(ValueError, match='aim > 0 and baseline > 0'):
    pass_cost_fit.passes_within(aim, baseline, 0.1, 0.01)

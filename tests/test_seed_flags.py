"""`command_line.seeds`: the sweeps' seed lists are integers in [0, 2**32 - 1], the range `np.random.seed` takes."""

from absl import app
import numpy as np
import pytest

from tff_robust.command_line import seeds


def test_the_range_is_numpys():
  np.random.seed(seeds.MAX)
  with pytest.raises(ValueError):
    np.random.seed(seeds.MAX + 1)


def test_a_list_of_seeds_is_parsed():
  assert seeds.parse_list(['0', '7', str(seeds.MAX)], 'seeds') == [0, 7, seeds.MAX]


@pytest.mark.parametrize('value', ['-1', str(2**32), 'x', '1.5'])
def test_a_bad_seed_is_refused_naming_the_flag_and_the_range(value):
  expected = rf"--seeds: each seed must be an integer in \[0, 4294967295\], got '{value}'"
  with pytest.raises(app.UsageError, match=expected):
    seeds.parse_list(['0', value], 'seeds')

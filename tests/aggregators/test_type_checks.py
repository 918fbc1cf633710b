"""`type_checks.check_number`, the one check of every float hyperparameter: NaN and +-inf never pass, the bounds
are open or closed as asked, and the message names the argument and the allowed range."""

import math

import numpy as np
import pytest

from tff_robust.aggregators import type_checks


@pytest.mark.parametrize('value, bounds, message', [
    (math.nan, dict(minimum=0.0), r'rate must be a finite number >= 0, got nan'),  # nan < 0 is False
    (math.nan, dict(), r'rate must be a finite number, got nan'),
    (math.inf, dict(minimum=0.0), r'>= 0, got inf'),
    (-math.inf, dict(maximum=1.0), r'rate must be a finite number <= 1, got -inf'),
    (np.float32('nan'), dict(minimum=0.0, maximum=1.0), r'in \[0, 1\]'),
    (0.0, dict(minimum=0.0, strict=True), r'> 0, got 0.0'),
    (0.5, dict(minimum=0.0, maximum=0.5, strict_maximum=True), r'in \[0, 0.5\), got 0.5'),
    (1.0, dict(minimum=0.0, strict=True, maximum=1.0, strict_maximum=True), r'in \(0, 1\)'),
    (0.5, dict(maximum=0.5, strict_maximum=True), r'< 0.5'),
    (True, dict(minimum=0.0), r'got True'),
    ('0.1', dict(minimum=0.0), r"got '0.1'"),
    (1 + 0j, dict(minimum=0.0), r'got \(1\+0j\)'),
])
def test_a_value_outside_the_range_or_not_finite_is_refused_naming_the_argument(value, bounds, message):
  with pytest.raises(ValueError, match=message):
    type_checks.check_number('rate', value, **bounds)


@pytest.mark.parametrize('value, bounds', [
    (0.0, dict(minimum=0.0)), (0.4999, dict(minimum=0.0, maximum=0.5, strict_maximum=True)),
    (-1e30, dict()), (np.int64(3), dict(minimum=1.0)), (np.float32(0.25), dict(minimum=0.0, maximum=1.0)),
])
def test_a_finite_number_in_range_is_returned_as_a_float(value, bounds):
  checked = type_checks.check_number('rate', value, **bounds)
  assert type(checked) is float and checked == float(value)


@pytest.mark.parametrize('value', [True, '1', None, [1.0]])
def test_check_real_type_refuses_what_is_not_a_real_number_with_a_type_error(value):
  with pytest.raises(TypeError, match='rate must be a number'):
    type_checks.check_real_type('rate', value)

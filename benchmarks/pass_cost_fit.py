"""The arithmetic of section 5 of `benchmarks.scaling`: a round's CPU time as fixed + passes x per-pass cost.

No flags here, so tests and other programs can import it beside `experiments.train_flags`.
"""

import numpy as np


def linear_fit(passes, seconds) -> tuple[float, float]:
  """(fixed, per_pass) of the least-squares line seconds = fixed + passes x per_pass."""
  if len(passes) != len(seconds) or len(set(passes)) < 2:
    raise ValueError(f'linear_fit needs as many seconds as passes and at least 2 distinct pass counts, got passes='
                     f'{list(passes)} and {len(seconds)} seconds')
  per_pass, fixed = np.polyfit(np.asarray(passes, np.float64), np.asarray(seconds, np.float64), 1)
  return float(fixed), float(per_pass)


def passes_within(aim: float, baseline: float, fixed: float, per_pass: float) -> str:
  """The largest pass count n >= 0 with fixed + n x per_pass <= aim x baseline, as text ('none' if even 0 is over)."""
  if aim <= 0 or baseline <= 0:
    raise ValueError(f'passes_within needs aim > 0 and baseline > 0, got aim={aim}, baseline={baseline}')
  room = aim * baseline - fixed
  if room < 0:
    return 'none'
  return 'any' if per_pass <= 0 else str(int(room // per_pass))

"""Seeds on the command line: integers in [0, `MAX`], the range NumPy's and scikit-learn's legacy seeding take
(`np.random.seed`, `random_state`), which the binaries reach through Keras and the tasks' data splits."""

from absl import app

MAX = 2**32 - 1


def parse_list(values, flag: str) -> list[int]:
  """The integers of a list flag's `values` (e.g. `--seeds=0,1,2`); `app.UsageError` naming `--flag` and the range
  for an element that is not an integer in [0, `MAX`]."""
  seeds = []
  for value in values:
    try:
      seed = int(value)
    except ValueError:
      seed = None
    if seed is None or not 0 <= seed <= MAX:
      raise app.UsageError(f'--{flag}: each seed must be an integer in [0, {MAX}], got {value!r}')
    seeds.append(seed)
  return seeds

"""Runs grouped by the settings in which they differ, so that the report averages only runs that differ in seed.

A run's settings (`paper_tables.Record.settings`, from its run_settings.json and summary.json) are its flags
other than the layouts' axes (task, algorithm, corruption, ρ, θ, seed), and only those the run uses
(`experiments.flag_users`). Each setting is of one kind:
  * 'algorithm': it configures one algorithm (e.g. `trim_fraction`): a table row, `trimmed_mean (trim_fraction=0.2)`;
  * 'corruption': it configures one attack (e.g. `ipm_epsilon`): a table of its own beside the attack's name;
  * 'common': any other (learning rates, the cohort, rounds, task options): a table of its own.
`groups` splits runs by their settings of one kind and labels each group with the settings that tell it from the
others. A setting that some of the runs do not record (runs older than the flag, summary.json or results.csv
inputs) is not compared. No absl flags, no TensorFlow.
"""

from typing import Callable, Sequence

from experiments import flag_users

KINDS = ('algorithm', 'corruption', 'common')


def kind(name: str) -> str:
  """The kind of setting `name`: the selector ('algorithm' or 'corruption') its table entry leads to (through its
  first selector's own entry, e.g. --snr_db's --channel), or 'common'."""
  users = flag_users.FLAG_USERS.get(name)
  while users is not None and users.selectors[0] not in ('algorithm', 'corruption'):
    users = flag_users.FLAG_USERS.get(users.selectors[0])
  return 'common' if users is None else users.selectors[0]


def shown(value) -> str:
  return f'{value:g}' if isinstance(value, float) else str(value)


def _order(key: tuple) -> tuple:
  """Numbers by value, other values by their text, so that groups come out in a fixed order."""
  return tuple((0, value, '') if isinstance(value, (int, float)) and not isinstance(value, bool)
               else (1, 0, str(value)) for value in key)


def groups(runs: Sequence, setting_kind: str,
           settings_of: Callable = lambda run: run.settings) -> list[tuple[str, list]]:
  """[(label, runs of the group)]: `runs` grouped by their values of the settings of `setting_kind` that every run
  records (`settings_of(run)`: a tuple of (name, value), by default `run.settings`), groups in the order of those
  values; each label is 'name=value, ...' of the settings whose values differ between the groups ('' when there is
  one group)."""
  if setting_kind not in KINDS:
    raise ValueError(f'setting_kind must be one of {KINDS}, got {setting_kind!r}')
  if not runs:
    return []
  recorded = set.intersection(*(set(dict(settings_of(run))) for run in runs))
  compared = sorted(name for name in recorded if kind(name) == setting_kind)
  grouped = {}
  for run in runs:
    settings = dict(settings_of(run))
    grouped.setdefault(tuple(settings[name] for name in compared), []).append(run)
  differing = [index for index in range(len(compared)) if len({key[index] for key in grouped}) > 1]
  return [(', '.join(f'{compared[index]}={shown(key[index])}' for index in differing), grouped[key])
          for key in sorted(grouped, key=_order)]


def check_one_run_per_seed(runs: Sequence, where: str, seed_of: Callable = lambda run: run.seed,
                           source_of: Callable = lambda run: run.source) -> None:
  """Raises ValueError naming two of `runs` (the runs of one cell, `where`) that share a seed: equal in every
  recorded setting, they differ in something unrecorded (or are one run given twice), and a mean would hide it."""
  seen = {}
  for run in runs:
    if seed_of(run) in seen:
      raise ValueError(f'{where}: {source_of(seen[seed_of(run)])} and {source_of(run)} are both seed '
                       f'{seed_of(run)} with the same recorded settings; give each run once')
    seen[seed_of(run)] = run

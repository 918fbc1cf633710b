"""The settings that define a run, recorded in its directory, so that a later command continues it only under them.

A run's directory holds one run. `record` writes its settings ({runner flag name: JSON value}) to
`run_settings.json`; `check_same_run` raises `SettingsMismatch`, naming every flag whose value differs, when a
command with other settings would resume (or overwrite) it. A directory with checkpoints (`<dir>/checkpoints`)
but no record holds a run whose settings are unknown and is refused too; one with neither holds no run.
A flag the record lacks (one added by a later version of the package) is admitted at its default value, which
keeps the recorded run's meaning; at any other value it is a difference like any other.

Imports no TensorFlow: the runner checks its directory before loading it.
"""

import json
import os

FILENAME = 'run_settings.json'
_CHECKPOINTS = 'checkpoints'  # `training_loop.run_training`'s checkpoint directory


class SettingsMismatch(ValueError):
  """A run directory holds a run with other (or unknown) settings; the message is one line naming them."""


def _as_json(settings: dict) -> dict:
  """`settings` as `record` writes and `json.load` reads them back (tuples become lists)."""
  return json.loads(json.dumps(settings))


def record(run_dir: str, settings: dict) -> None:
  """Writes `settings` to `<run_dir>/run_settings.json` (atomically: a reader sees the old or the new file)."""
  os.makedirs(run_dir, exist_ok=True)
  path = os.path.join(run_dir, FILENAME)
  with open(path + '.tmp', 'w') as f:
    json.dump(_as_json(settings), f, indent=2, sort_keys=True)
  os.replace(path + '.tmp', path)


def check_same_run(run_dir: str, settings: dict, defaults: dict | None = None) -> None:
  """Raises SettingsMismatch unless `run_dir` holds no run, or a run recorded with `settings`.

  `defaults` ({flag name: default value}) admits a flag missing from the record when `settings` gives it its
  default: the run was recorded before that flag existed, and the default is what it ran with.
  """
  path = os.path.join(run_dir, FILENAME)
  if not os.path.exists(path):
    if os.path.isdir(os.path.join(run_dir, _CHECKPOINTS)):
      raise SettingsMismatch(f'{run_dir} holds checkpoints of a run whose settings were not recorded')
    return
  try:
    with open(path) as f:
      recorded = json.load(f)
  except (OSError, ValueError) as error:
    raise SettingsMismatch(f'{path} cannot be read ({error})') from None
  given = _as_json(settings)
  added_at_default = {
      name for name, value in _as_json(defaults or {}).items()
      if name not in recorded and name in given and given[name] == value
  }
  shown = lambda values, name: json.dumps(values[name]) if name in values else 'absent'
  differing = [
      f'--{name} was {shown(recorded, name)}, now {shown(given, name)}'
      for name in sorted((set(recorded) | set(given)) - added_at_default)
      if name not in recorded or name not in given or recorded[name] != given[name]
  ]
  if differing:
    raise SettingsMismatch(f'{run_dir} holds a run with other settings ({"; ".join(differing)})')

"""The settings that define a run, recorded in its directory, so that a later command continues it only under them.

A run's directory holds one run. `record` writes its settings ({runner flag name: JSON value}) to
`run_settings.json`; `check_same_run` raises `SettingsMismatch`, naming every flag whose value differs, when a
command with other settings would resume (or overwrite) it. A directory with checkpoints (`<dir>/checkpoints`)
but no record holds a run whose settings are unknown and is refused too; one with neither holds no run.
A flag the record lacks (one added by a later version of the package) is admitted at its default value, which
keeps the recorded run's meaning; at any other value it is a difference like any other.

The file is strict JSON (RFC 8259 has no NaN or infinity): a non-finite float is written as {"float": "nan"},
{"float": "inf"} or {"float": "-inf"}, and `read` returns it as that float again.

Imports no TensorFlow: the runner checks its directory before loading it.
"""

import json
import math
import os

FILENAME = 'run_settings.json'
_CHECKPOINTS = 'checkpoints'  # `training_loop.run_training`'s checkpoint directory


class SettingsMismatch(ValueError):
  """A run directory holds a run with other (or unknown) settings; the message is one line naming them."""


def _encoded(value):
  """`value` with every non-finite float replaced by {"float": "nan" | "inf" | "-inf"} (tuples become lists)."""
  if isinstance(value, float) and not math.isfinite(value):
    return {'float': str(value)}
  if isinstance(value, (list, tuple)):
    return [_encoded(item) for item in value]
  if isinstance(value, dict):
    return {key: _encoded(item) for key, item in value.items()}
  return value


def _decoded(mapping: dict):
  """`json.load`'s object hook inverting `_encoded`."""
  if set(mapping) == {'float'} and mapping['float'] in ('nan', 'inf', '-inf'):
    return float(mapping['float'])
  return mapping


def _as_json(settings: dict) -> dict:
  """`settings` as `record` writes them and `json.load` reads them back, non-finite floats encoded (so that a
  recorded NaN equals a given NaN)."""
  return json.loads(json.dumps(_encoded(settings), allow_nan=False))


def _shown(value) -> str:
  return value['float'] if isinstance(value, dict) and set(value) == {'float'} else json.dumps(value)


def record(run_dir: str, settings: dict) -> None:
  """Writes `settings` to `<run_dir>/run_settings.json` (atomically: a reader sees the old or the new file)."""
  os.makedirs(run_dir, exist_ok=True)
  path = os.path.join(run_dir, FILENAME)
  with open(path + '.tmp', 'w') as f:
    json.dump(_as_json(settings), f, indent=2, sort_keys=True, allow_nan=False)
  os.replace(path + '.tmp', path)


def read(run_dir: str) -> dict | None:
  """The settings recorded in `run_dir` as `record` was given them (lists for tuples), or None if it has none.

  Raises:
    ValueError: the file is not JSON.
  """
  path = os.path.join(run_dir, FILENAME)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f, object_hook=_decoded)


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
      recorded = _as_json(json.load(f))  # a bare NaN of a record written before the encoding, too
  except (OSError, ValueError) as error:
    raise SettingsMismatch(f'{path} cannot be read ({error})') from None
  given = _as_json(settings)
  added_at_default = {
      name for name, value in _as_json(defaults or {}).items()
      if name not in recorded and name in given and given[name] == value
  }
  shown = lambda values, name: _shown(values[name]) if name in values else 'absent'
  differing = [
      f'--{name} was {shown(recorded, name)}, now {shown(given, name)}'
      for name in sorted((set(recorded) | set(given)) - added_at_default)
      if name not in recorded or name not in given or recorded[name] != given[name]
  ]
  if differing:
    raise SettingsMismatch(f'{run_dir} holds a run with other settings ({"; ".join(differing)})')

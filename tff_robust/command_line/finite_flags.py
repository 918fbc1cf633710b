"""The command line of the package's binaries: absl's parsing, then no float flag may be NaN or infinite.

absl's `DEFINE_float` bounds compare with `<` and `>`, which NaN passes (`--client_learning_rate=nan` with
`lower_bound=0.0` is accepted) and which bound infinity only from one side. Every binary (the runner, the
sweeps and tables, the benchmarks, `worker_service`) therefore parses its command line with `parse_flags`:
absl's parsing and validators, then `check_finite_float_flags` over every float flag defined by then, whichever
module defined it, so a flag added later needs no code of its own. A float flag is one of `DEFINE_float`,
`DEFINE_multi_float` or `define_float_list` (a comma-separated list of numbers); NaN is refused in every one
and +-inf unless the flag was passed to `allow_infinity`. A refusal is one line on stderr, `error: ...` naming
the flag, and exit status `REFUSED`, before the binary does anything else.

  if __name__ == '__main__':
    app.run(main, flags_parser=finite_flags.parse_flags)
"""

import math
import sys
from typing import NoReturn, Optional

from absl import flags

flags.disclaim_key_flags()  # a flag of `define_float_list` belongs to the module that calls it

REFUSED = 2  # the exit status of a refused command line (`experiments.exit_statuses.REFUSED`)

_INFINITY_ALLOWED = set()  # names of the float flags for which +-inf means something


class FloatListParser(flags.ListParser):
  """absl's comma-separated list parser, each element a float (`--snr_db_values=-10,0,10`)."""

  def parse(self, argument):
    """The comma-separated `argument` as a list of Python floats (NaN and inf are refused later, by `parse_flags`)."""
    return [float(element) for element in super().parse(argument)]

  def flag_type(self):
    """What `--help` shows as the flag's type."""
    return 'comma separated list of floats'


def define_float_list(name: str, default, help_text: str,
                      flag_values: flags.FlagValues = flags.FLAGS) -> flags.FlagHolder:
  """Defines a flag whose value is a list of floats, given as a comma-separated list (`--levels=0.8,0.5`)."""
  return flags.DEFINE(FloatListParser(), name, default, help_text, flag_values=flag_values,
                      serializer=flags.CsvListSerializer(','))


def allow_infinity(flag: flags.FlagHolder) -> None:
  """Lets `flag` take +-inf (NaN stays refused): for a float flag whose infinite value has a meaning."""
  _INFINITY_ALLOWED.add(flag.name)


def _float_values(flag: flags.Flag) -> list:
  """The float values of `flag` (empty for a flag that is not a float flag or is unset)."""
  if not isinstance(flag.parser, (flags.FloatParser, FloatListParser)) or flag.value is None:
    return []
  return list(flag.value) if isinstance(flag.value, (list, tuple)) else [flag.value]


def float_flags(flag_values: flags.FlagValues = flags.FLAGS) -> list:
  """Every float flag of `flag_values` (`DEFINE_float`, `DEFINE_multi_float`, `define_float_list`), by name."""
  found = {id(flag): flag for flag in (flag_values[name] for name in flag_values)}
  return sorted(
      (flag for flag in found.values() if isinstance(flag.parser, (flags.FloatParser, FloatListParser))),
      key=lambda flag: flag.name,
  )


def nonfinite_flag_error(flag: flags.Flag) -> Optional[str]:
  """Why `flag`'s value is refused (one line naming it), or None: a NaN, or an infinity it does not allow."""
  values = _float_values(flag)
  given = f'--{flag.name}={",".join(str(value) for value in values)}'
  if any(math.isnan(value) for value in values):
    return f'{given}: must be a number, not NaN'
  if flag.name not in _INFINITY_ALLOWED and any(math.isinf(value) for value in values):
    return f'{given}: must be finite'
  return None


def check_finite_float_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Raises `flags.IllegalFlagValueError` naming the first float flag (by name) that is NaN, or +-inf without
  `allow_infinity`."""
  for flag in float_flags(flag_values):
    error = nonfinite_flag_error(flag)
    if error is not None:
      raise flags.IllegalFlagValueError(error)


def refuse(message) -> NoReturn:
  """Ends the binary with `message` as one line `error: ...` on stderr and exit status `REFUSED`."""
  sys.stderr.write(f'error: {" ".join(str(message).split())}\n')
  sys.exit(REFUSED)


def parse_checked(argv: list, flag_values: flags.FlagValues = flags.FLAGS) -> list:
  """absl's parsing of `argv` into `flag_values` (validators included), then `check_finite_float_flags`; returns
  the positional arguments (argv[0] first). Raises `flags.Error` naming the flag."""
  positional = flag_values(argv)
  check_finite_float_flags(flag_values)
  return positional


def parse_flags(argv: list) -> list:
  """`parse_checked` into `flags.FLAGS`, as `app.run`'s `flags_parser`: a refusal ends the binary (`refuse`)."""
  try:
    return parse_checked(argv)
  except flags.Error as error:
    refuse(error)

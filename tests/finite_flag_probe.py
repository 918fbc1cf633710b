r"""`python -m tests.finite_flag_probe BINARY`: every float flag of binary BINARY given NaN, inf and -inf.

Imports module BINARY (which defines its flags), then parses `BINARY --<flag>=<value>` for every float flag
(`finite_flags.float_flags`) and value with `finite_flags.parse_flags`, the parser of every binary's command line
(`tests/test_finite_flags.py` checks that each binary parses with it), and prints one JSON object
{"--<flag>=<value>": [exit status, stderr]} (status 0: accepted).
"""

import contextlib
import importlib
import io
import json
import sys

from absl import flags

from tff_robust.command_line import finite_flags

VALUES = ('nan', 'inf', '-inf')


def probe(binary: str) -> dict:
  importlib.import_module(binary)
  results = {}
  for flag in finite_flags.float_flags():
    for value in VALUES:
      argument = f'--{flag.name}={value}'
      flags.FLAGS.unparse_flags()
      stderr = io.StringIO()
      status = 0
      with contextlib.redirect_stderr(stderr):
        try:
          finite_flags.parse_flags([binary, argument])
        except SystemExit as exit_:
          status = exit_.code
      results[argument] = [status, stderr.getvalue()]
  return results


if __name__ == '__main__':
  print(json.dumps(probe(sys.argv[1])))

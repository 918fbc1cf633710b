r"""`python -m tests.readme_flag_parse MODULE ARGVS_JSON`: the flag errors of each argv parsed by MODULE's absl flags.

Imports MODULE (which defines its flags), parses each argv of the JSON list ARGVS_JSON (`--help` and `--helpfull`
skipped: they exit) with absl's FLAGS, and prints a JSON list of '<argv>: <error>' on its last line
(`tests/test_readme_examples.py`, one process per module: two binaries' flags would clash in one).
"""

import importlib
import json
import sys

from absl import flags


def parse_errors(module: str, argvs: list[list[str]]) -> list[str]:
  importlib.import_module(module)
  errors = []
  for argv in argvs:
    if argv in (['--help'], ['--helpfull']):
      continue
    try:
      flags.FLAGS(['readme'] + argv)
    except flags.Error as error:
      errors.append(f'{argv}: {error}')
    flags.FLAGS.unparse_flags()
  return errors


if __name__ == '__main__':
  print(json.dumps(parse_errors(sys.argv[1], json.loads(sys.argv[2]))))

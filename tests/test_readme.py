"""The README and docs/ say only true things about the package's names and files: every `tff_robust.<...>`
path they name is reachable after a plain `import tff_robust`, and every relative link resolves inside the
repository."""

import json
import os
import pathlib
import re
import subprocess
import sys

_REPO = pathlib.Path(__file__).resolve().parent.parent
_DOCUMENTS = [_REPO / 'README.md', *sorted((_REPO / 'docs').glob('*.md'))]
_DOTTED_NAME = re.compile(r'\btff_robust(?:\.[A-Za-z_][A-Za-z0-9_]*)+')


def _documented_names() -> list[str]:
  return sorted({m.group(0) for doc in _DOCUMENTS for m in _DOTTED_NAME.finditer(doc.read_text())})


def _resolve_names(names) -> dict:
  """Evaluates each dotted name in a fresh interpreter after only `import tff_robust`: {name: error or None},
  and whether TensorFlow was imported by `import tff_robust` itself."""
  script = (
      'import json, sys\n'
      'import tff_robust\n'
      "cheap = 'tensorflow' not in sys.modules\n"
      'errors = {}\n'
      'for name in json.loads(sys.argv[1]):\n'
      '  try:\n'
      '    eval(name)\n'
      '    errors[name] = None\n'
      '  except Exception as e:\n'
      "    errors[name] = f'{type(e).__name__}: {e}'\n"
      "print(json.dumps({'cheap': cheap, 'errors': errors}))\n"
  )
  result = subprocess.run(
      [sys.executable, '-c', script, json.dumps(list(names))],
      cwd=_REPO, capture_output=True, text=True, timeout=600,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'},
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_documents_name_the_modules_users_reach_for():
  names = _documented_names()
  assert 'tff_robust.aggregators.privacy.non_secure_intrinsics' in names
  assert 'tff_robust.simulation.client_state_store.ClientStateStore' in names


def test_every_documented_name_is_reachable_from_the_package_import():
  names = _documented_names() + [
      'tff_robust.aggregators.privacy',
      'tff_robust.simulation.execution_context',
      'tff_robust.simulation.client_state_store',
  ]
  resolved = _resolve_names(names)
  assert resolved['cheap'], '`import tff_robust` alone imported TensorFlow'
  failures = {name: error for name, error in resolved['errors'].items() if error}
  assert failures == {}


def test_an_unknown_submodule_is_an_attribute_error_naming_it():
  resolved = _resolve_names(['tff_robust.aggregators.no_such_module'])
  error = resolved['errors']['tff_robust.aggregators.no_such_module']
  assert error.startswith('AttributeError') and 'no_such_module' in error

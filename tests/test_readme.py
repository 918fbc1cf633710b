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
_MARKDOWN_LINK = re.compile(r'\]\(([^)\s]+)\)')
_RELATIVE_PATH = re.compile(r'`((?:\.\./|\./)[^`\s]+)`')
_REPOSITORY_PATH = re.compile(r'`((?:docs|results|experiments|tests|tff_robust|benchmarks|scripts)/[^`\s*{}<>|]+)`')


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
      'tff_robust.runtime.execution_context',
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


def _relative_references(text: str) -> set[str]:
  """Markdown link targets that are not URLs or anchors, and code spans that are paths (`./x`, `../x`, or a
  path under one of the repository's folders, without wildcards or placeholders)."""
  links = {m.group(1) for m in _MARKDOWN_LINK.finditer(text) if '://' not in m.group(1)}
  links = {link.split('#', 1)[0] for link in links if not link.startswith(('#', 'mailto:'))}
  paths = {m.group(1) for m in _RELATIVE_PATH.finditer(text)}
  paths |= {m.group(1).rstrip('/') for m in _REPOSITORY_PATH.finditer(text)}
  return {link for link in links | paths if link}


def test_every_relative_reference_resolves_inside_the_repository():
  unresolved = []
  for doc in _DOCUMENTS:
    for reference in sorted(_relative_references(doc.read_text())):
      base = doc.parent if reference.startswith('.') or doc.parent == _REPO else _REPO
      target = (base / reference).resolve()
      if not target.is_relative_to(_REPO) or not target.exists():
        unresolved.append(f'{doc.relative_to(_REPO)}: {reference}')
  assert unresolved == []


def test_the_api_reference_lists_every_public_builder_and_factory():
  api = (_REPO / 'docs' / 'api.md').read_text()
  public = _resolve_public_names()
  missing = [name for name in public if f'`{name}' not in api]
  assert missing == []


def _resolve_public_names() -> list[str]:
  """`tff_robust.processes.build_*` and `tff_robust.aggregators.*Factory` / `*_factory` exported by the
  packages (their `__init__` imports, or the `'name': 'submodule'` entries of a lazy `__init__`'s table), as
  dotted names."""
  names = []
  for package, pattern in (('processes', r'build_\w+'), ('aggregators', r'\w+(?:Factory|_factory)')):
    init = (_REPO / 'tff_robust' / package / '__init__.py').read_text()
    exported = re.findall(r'^from tff_robust\.[\w.]+ import (\w+)$', init, re.MULTILINE)
    for name in exported + re.findall(r"'(\w+)': '\w+'", init):
      if re.fullmatch(pattern, name):
        names.append(f'tff_robust.{package}.{name}')
  return names

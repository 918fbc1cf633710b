"""The README and docs/ say only true things about the package's names and files: every `tff_robust.<...>`
path they name is reachable after a plain `import tff_robust`, every relative link resolves inside the
repository, and the README's Shakespeare numbers are those of the claims files it links."""

import json
import os
import re
import subprocess
import sys

from tests import repository

_DOCUMENTS = [repository.ROOT / 'README.md', *sorted((repository.ROOT / 'docs').rglob('*.md'))]
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
      cwd=repository.ROOT, capture_output=True, text=True, timeout=600,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'},
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def _paragraphs(text: str) -> list[list[str]]:
  """Runs of consecutive prose lines outside code blocks (a table, list item, heading or HTML comment ends one)."""
  paragraphs, current, inside = [], [], False
  for line in text.splitlines():
    if line.startswith('```'):
      inside = not inside
    prose = not inside and line.strip() and not line.startswith(('```', '|', '- ', '#', '<!--'))
    if prose:
      current.append(line)
    elif current:
      paragraphs.append(current)
      current = []
  return paragraphs + ([current] if current else [])


def test_the_readme_is_short_and_its_paragraphs_too():
  """Issue 44: the README is the front door, at most 200 lines, no paragraph longer than 6 lines."""
  text = (repository.ROOT / 'README.md').read_text()
  assert len(text.splitlines()) <= 200
  assert [p[0] for p in _paragraphs(text) if len(p) > 6] == []


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


def _relative_references(text: str) -> tuple[set[str], set[str]]:
  """(Markdown link targets that are not URLs or anchors, which resolve from their document's folder; code spans
  that are paths, `./x` or `../x` from the document's folder, or a path under one of the repository's folders from
  the repository, without wildcards or placeholders)."""
  links = {m.group(1) for m in _MARKDOWN_LINK.finditer(text) if '://' not in m.group(1)}
  links = {link.split('#', 1)[0] for link in links if not link.startswith(('#', 'mailto:'))}
  links |= {m.group(1) for m in _RELATIVE_PATH.finditer(text)}
  paths = {m.group(1).rstrip('/') for m in _REPOSITORY_PATH.finditer(text)}
  return {link for link in links if link}, paths


def test_every_relative_reference_resolves_inside_the_repository():
  unresolved = []
  for doc in _DOCUMENTS:
    links, paths = _relative_references(doc.read_text())
    for reference, base in sorted([(link, doc.parent) for link in links] + [(path, repository.ROOT) for path in paths]):
      target = (base / reference).resolve()
      if not target.is_relative_to(repository.ROOT) or not target.exists():
        unresolved.append(f'{doc.relative_to(repository.ROOT)}: {reference}')
  assert unresolved == []


def _api_pages():
  """scripts/gen_api_pages.py, which generates the API reference at `mkdocs build`, imported by path."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location('gen_api_pages', repository.ROOT / 'scripts' / 'gen_api_pages.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_every_public_name_has_a_docstring():
  """What fails `mkdocs build`, checked here too, so that `pytest tests` names the culprits."""
  assert _api_pages().undocumented_public_names() == []


def test_the_api_reference_has_a_page_for_every_public_module():
  modules = [module for module, _ in _api_pages().module_pages()]
  for name in ('tff_robust', 'tff_robust.processes.rfa', 'tff_robust.aggregators.defences.registry',
               'tff_robust.tasks.digits', 'tff_robust.runtime.execution_context'):
    assert name in modules
  assert not [m for m in modules if any(part.startswith('_') for part in m.split('.'))]
  sources = [path.relative_to(repository.ROOT).with_suffix('').parts
             for path in (repository.ROOT / 'tff_robust').rglob('*.py')]
  sources = [parts[:-1] if parts[-1] == '__init__' else parts for parts in sources]
  assert set(modules) == {'.'.join(parts) for parts in sources if not any(p.startswith('_') for p in parts)}


def test_the_docstring_check_names_an_undocumented_public_function(tmp_path):
  package = tmp_path / 'tff_robust'
  package.mkdir()
  (package / '__init__.py').write_text('"""A package."""\n')
  (package / 'module.py').write_text(
      '"""A module."""\n\ndef documented():\n  """Yes."""\n\n\ndef bare():\n  pass\n\n\n'
      'def _private():\n  pass\n\n\nclass Thing:\n  """A class."""\n\n  def method(self):\n    pass\n')
  assert _api_pages().undocumented_public_names(tmp_path) == ['tff_robust.module.Thing.method',
                                                              'tff_robust.module.bare']


def _decimals(text: str) -> set[str]:
  return set(re.findall(r'\d+\.\d\d\b', text))


def test_the_readmes_shakespeare_numbers_are_the_claims_files():
  """Each number (xx.yy) in a row of the README's Shakespeare claims table is in one row of the claims.md it links
  (`experiments.paper_report` rewrites those as seeds land, so a README left behind fails here)."""
  section = repository.ROOT.joinpath('README.md').read_text().split("## The papers' claims on Shakespeare")[1]
  rows = [line for line in section.split('\n## ')[0].splitlines() if line.startswith('| ') and 'results/' in line]
  assert len(rows) >= 4, section
  for row in rows:
    results_dir = re.search(r'\]\((results/[^)]+?)/?\)', row).group(1)
    claims = repository.ROOT.joinpath(results_dir, 'claims.md').read_text().splitlines()
    ours = _decimals(row.split('|')[3])
    assert ours and any(ours <= _decimals(claim) for claim in claims), (row, results_dir)

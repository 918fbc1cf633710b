"""The Bazel BUILD file covers every Python source, binary and test, and declares internal deps."""

import ast
import os

from tests import repository

_SOURCE_DIRS = ('tff_robust', 'experiments', 'tests', 'benchmarks', 'scripts')


def _targets():
  targets = {}

  def rule(kind):
    def record(**kwargs):
      targets[kwargs['name']] = dict(kind=kind, **kwargs)
    return record

  namespace = dict(
      load=lambda *args: None, package=lambda **kwargs: None, licenses=lambda *args: None,
      py_library=rule('py_library'), py_binary=rule('py_binary'), py_test=rule('py_test'),
  )
  exec(compile((repository.ROOT / 'BUILD').read_text(), 'BUILD', 'exec'), namespace)  # Starlark subset == Python
  return targets


def _python_files():
  return sorted(
      str(path.relative_to(repository.ROOT))
      for directory in _SOURCE_DIRS
      for path in (repository.ROOT / directory).rglob('*.py')
      if '__pycache__' not in path.parts
  )


def _module_name(path):
  module = path[:-3].replace(os.sep, '.')
  return module.removesuffix('.__init__')


def test_every_python_file_is_in_exactly_one_target():
  owners = {}
  for name, target in _targets().items():
    for source in target['srcs']:
      assert source not in owners, f'{source} is in both {owners[source]} and {name}'
      owners[source] = name
  missing = [path for path in _python_files() if path not in owners]
  assert not missing, f'Python files without a BUILD target: {missing}'
  stale = [source for source in owners if not (repository.ROOT / source).exists()]
  assert not stale, f'BUILD lists files that do not exist: {stale}'


def test_tests_are_py_test_and_experiments_are_py_binary():
  for target in _targets().values():
    (source,) = target['srcs']
    if source.startswith('tests/') and os.path.basename(source).startswith('test_'):
      assert target['kind'] == 'py_test', source
    if source.startswith(('experiments/', 'benchmarks/', 'scripts/')) and not source.endswith('__init__.py'):
      assert target['kind'] == 'py_binary', source


def test_every_internal_import_is_a_declared_dependency():
  targets = _targets()
  owner_of_module = {_module_name(t['srcs'][0]): name for name, t in targets.items()}
  for name, target in targets.items():
    deps = {dep.lstrip(':') for dep in target.get('deps', [])}
    assert deps <= set(targets), f'{name} depends on unknown targets {deps - set(targets)}'
    tree = ast.parse((repository.ROOT / target['srcs'][0]).read_text())
    for node in ast.walk(tree):
      imported = []
      if isinstance(node, ast.Import):
        imported = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.module:
        imported = [node.module] + [f'{node.module}.{alias.name}' for alias in node.names]
      for module in imported:
        owner = owner_of_module.get(module)
        if owner is not None and owner != name:
          assert owner in deps, f'{name} imports {module} but does not depend on :{owner}'

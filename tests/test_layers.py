"""The package's layers import in one direction (`/work/shared/design.md`: lower layers never import higher ones):
command_line < core < runtime < aggregators < processes < tasks < simulation.

`command_line` (`finite_flags`, the command-line parser of every binary) imports nothing of the package, so every
layer and binary may use it. `runtime`, where computations run (issue 34), uses TFF but no algorithm: it imports no
layer but `command_line` (`worker_service` parses its flags with it).
`tasks` (a model, data and evaluation per task) may use the algorithms' layers; `simulation` (the training loop,
checkpoints, client pipelines) builds on the tasks.
"""

import ast
import pathlib

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'tff_robust'
_LAYERS = ('command_line', 'core', 'runtime', 'aggregators', 'processes', 'tasks', 'simulation')


def _imported_layers(path: pathlib.Path) -> set[str]:
  """The `tff_robust` subpackages that the module at `path` imports, at any depth of its code."""
  layers = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      parts = node.module.split('.')
      if parts[0] == 'tff_robust':
        layers.update([parts[1]] if len(parts) > 1 else [alias.name for alias in node.names])
    elif isinstance(node, ast.Import):
      layers.update(alias.name.split('.')[1] for alias in node.names if alias.name.startswith('tff_robust.'))
  return layers & set(_LAYERS)


def _imports_of(layer: str) -> dict:
  """{module path: the other layers it imports} for every module of `layer` that imports another layer."""
  found = {}
  for path in sorted((_PACKAGE / layer).rglob('*.py')):
    others = _imported_layers(path) - {layer}
    if others:
      found[str(path.relative_to(_PACKAGE.parent))] = sorted(others)
  return found


def test_every_subpackage_is_a_known_layer():
  subpackages = {path.parent.name for path in _PACKAGE.glob('*/__init__.py')}
  assert subpackages == set(_LAYERS)


def test_no_module_imports_a_higher_layer():
  upward = [
      f'{module} imports tff_robust.{imported}'
      for layer in _LAYERS
      for module, imported_layers in _imports_of(layer).items()
      for imported in imported_layers
      if _LAYERS.index(imported) > _LAYERS.index(layer)
  ]
  assert upward == []


def test_the_command_line_imports_no_other_layer():
  assert _imports_of('command_line') == {}


def test_the_runtime_imports_no_layer_but_the_command_line():
  assert {module: layers for module, layers in _imports_of('runtime').items() if layers != ['command_line']} == {}
  assert 'tff_robust/runtime/worker_service.py' in _imports_of('runtime')  # the scan sees the one it must

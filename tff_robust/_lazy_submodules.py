"""Submodules reachable as attributes of their package on first use (PEP 562 module `__getattr__`).

`import tff_robust` then `tff_robust.aggregators.privacy.non_secure_intrinsics(...)` works without importing
every module up front: a package's `__getattr__` imports `package.name` when `name` is one of its submodules.
"""

import importlib
import importlib.util


def submodule_getattr(package_name: str):
  """Returns a module-level `__getattr__` for `package_name` that imports its submodules on first access.

  A name that is not a submodule raises `AttributeError` naming it; an error raised while importing an
  existing submodule propagates unchanged.
  """

  def __getattr__(name):  # pylint: disable=invalid-name
    if not name.startswith('__') and importlib.util.find_spec(f'{package_name}.{name}') is not None:
      return importlib.import_module(f'{package_name}.{name}')
    raise AttributeError(f'module {package_name} has no attribute {name!r}')

  return __getattr__

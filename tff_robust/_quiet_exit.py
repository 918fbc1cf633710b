"""At interpreter exit, discard TFF's import-time execution context while Python's modules are still intact.

`import tensorflow_federated` installs a context whose worker manager is collected during interpreter shutdown,
after `subprocess` is torn down: Python then prints "Exception ignored in: ... ServiceManager.__del__ ...
AttributeError: 'NoneType' object has no attribute 'Popen'", and a worker that context started outlives the script
(NOTES.md). `import tff_robust` registers `discard_tff_default_context` with `atexit`; at exit, in a process that
imported TFF, it calls `execution_context.discard_tff_default_context`, whose collection of the manager stops that
worker. A context tff_robust installed is left alone (it stops its own worker). Imports nothing until then.
"""

import atexit
import sys


def discard_tff_default_context() -> None:
  """`execution_context.discard_tff_default_context()` if this process imported TFF; else nothing."""
  if 'tensorflow_federated' not in sys.modules:
    return
  try:
    from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top
  except ImportError:  # TFF's own import failed part way: there is no context to discard
    return
  execution_context.discard_tff_default_context()


def register() -> None:
  atexit.register(discard_tff_default_context)

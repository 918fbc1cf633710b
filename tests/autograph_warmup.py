"""AutoGraph's conversions carried from one forked run to the next (`tests/fork_server.py`).

AutoGraph converts each Python function that a `tf.function` traces (about 250 in a runner run on digits, ~4 s of
its ~15 s of CPU after the imports: NOTES.md, "Suite time") and caches the result per process, keyed by the
function's code object and the conversion options. A run forked from the fork server inherits the server's cache,
fills its own and takes it to its grave. So each run reports at exit what it converted (`report_at_exit`) and the
server converts the same functions itself between runs (`convert_reported`), for every run forked after.

Converting is pure Python (parse the source, transform the tree, compile it): it runs no TensorFlow op and starts no
runtime thread, so forking the server stays as safe as before (the server's threads are checked in
tests/test_fork_server.py). A function is found again by its code object: a run shares the server's code objects for
every module the server had imported, at the same address, so a reported `id` that the server's own objects have is
the same object; code of modules the run imported itself (the runner's `experiments.*`) has no such twin and is
skipped. Conversion keeps its meaning: AutoGraph reuses one cached conversion for every function of the same code,
whatever its closure, so a conversion made from the code's module globals alone is the one a run would make.
Anything that goes wrong here is skipped, never raised: a run then converts for itself, as without the server.
"""

import gc
import pickle
import types
from typing import BinaryIO, Iterator

from tensorflow.python.autograph.core import converter
from tensorflow.python.autograph.impl import api as autograph_api


def conversions() -> Iterator[tuple[types.CodeType, converter.ConversionOptions]]:
  """The (code, options) pairs in this process's AutoGraph cache."""
  for code, by_options in list(autograph_api._TRANSPILER._cache._cache.items()):  # pylint: disable=protected-access
    for options in list(by_options):
      if isinstance(code, types.CodeType):
        yield code, options


def report(file: BinaryIO) -> None:
  """Writes this process's conversions to `file`: code object ids, where they are, and the options."""
  pickle.dump([(id(code), code.co_filename, code.co_firstlineno, options) for code, options in conversions()], file)
  file.flush()


def _functions_by_code_id() -> dict[int, types.FunctionType]:
  """A function for every code object reachable from a live function of this process, by the code's id.

  A nested function's code (a constant of its parent's code) gets a function of the parent's globals and empty
  closure cells: AutoGraph reads a function's source through its code and its namespace through its globals.
  """
  gc.unfreeze()  # the fork server froze its imports (gc.freeze); get_objects leaves frozen objects out
  try:
    pending = [(obj.__code__, obj) for obj in gc.get_objects() if isinstance(obj, types.FunctionType)]
  finally:
    gc.freeze()
  found = {}
  while pending:
    code, function = pending.pop()
    if id(code) not in found:
      found[id(code)] = function
      pending += [(constant, types.FunctionType(constant, function.__globals__, constant.co_name,
                                                closure=tuple(types.CellType() for _ in constant.co_freevars)))
                  for constant in code.co_consts if isinstance(constant, types.CodeType)]
  return found


def convert_reported(file: BinaryIO, done: set) -> int:
  """Converts what a run reported in `file` (`report`) that this process shares and has not converted (`done`:
  reported entries already handled, updated). Returns the number converted."""
  file.seek(0)
  try:
    reported = [entry for entry in pickle.load(file) if (entry[0], entry[3]) not in done]
  except Exception:  # pylint: disable=broad-except
    return 0  # the run died before reporting
  if not reported:
    return 0
  functions = _functions_by_code_id()
  converted = 0
  for code_id, filename, first_line, options in reported:
    done.add((code_id, options))
    function = functions.get(code_id)
    if function is None or (function.__code__.co_filename, function.__code__.co_firstlineno) != (filename, first_line):
      continue  # code the run made itself
    try:
      autograph_api._TRANSPILER.transform(function, converter.ProgramContext(options=options))  # pylint: disable=protected-access
      converted += 1
    except Exception:  # pylint: disable=broad-except
      pass  # the run converts it for itself
  return converted

"""Training tasks: a model, federated training data and held-out evaluation, selectable by name (the runner's
`--task`).

`create_task(name, ...)` builds one (`registry`); `TASK_NAMES`, `TASK_OPTIONS`, `tasks_accepting` and
`builder_arguments` say which tasks exist and which builder options each takes (`task_names`). Importing this
package imports no TensorFlow, so that a runner checks its flags first: the builders load on first use.
"""

from tff_robust import _lazy_submodules
from tff_robust.tasks.task_names import builder_arguments
from tff_robust.tasks.task_names import TASK_NAMES
from tff_robust.tasks.task_names import TASK_OPTIONS
from tff_robust.tasks.task_names import tasks_accepting

_submodule = _lazy_submodules.submodule_getattr(__name__)


def __getattr__(name):  # pylint: disable=invalid-name
  """`create_task` from `registry`, and the submodules, imported on first use (PEP 562)."""
  if name == 'create_task':
    return _submodule('registry').create_task
  return _submodule(name)

"""Defences chosen by name: a chain of pre-aggregators and one robust rule (`registry` has the names, the spec
syntax and which parts are secure-compatible).

    chain = defences.parse('arc>gm')
    factory = defences.build_factory(chain, clients_per_round=10, num_byzantine=2)   # a tff.aggregators factory
    rule = defences.stacked_rule(chain, clients_per_round=10, num_byzantine=2)      # TensorFlow, for attacks
    defences.is_secure(chain)                                                       # True: no gathering

`parse`, `is_secure` and the names import no TensorFlow; `build_factory`, `stacked_rule`, `SecureBounds` and
`StackedRule` load it on first use.
"""

from tff_robust.aggregators.defences.registry import DefenceChain
from tff_robust.aggregators.defences.registry import PRE_AGGREGATOR_NAMES
from tff_robust.aggregators.defences.registry import RULE_NAMES
from tff_robust.aggregators.defences.registry import SPEC_LIST_SEPARATOR
from tff_robust.aggregators.defences.registry import is_secure
from tff_robust.aggregators.defences.registry import parse
from tff_robust.aggregators.defences.registry import parse_list

_TENSORFLOW_NAMES = {
    'build_factory': 'building', 'stacked_rule': 'building', 'SecureBounds': 'implementations',
    'StackedRule': 'implementations',
}


def __getattr__(name):  # pylint: disable=invalid-name
  """The TensorFlow parts (`_TENSORFLOW_NAMES`) and the submodules, imported on first use."""
  import importlib  # pylint: disable=g-import-not-at-top
  if name in _TENSORFLOW_NAMES:
    return getattr(importlib.import_module(f'{__name__}.{_TENSORFLOW_NAMES[name]}'), name)
  if not name.startswith('__') and importlib.util.find_spec(f'{__name__}.{name}') is not None:
    return importlib.import_module(f'{__name__}.{name}')
  raise AttributeError(f'module {__name__} has no attribute {name!r}')

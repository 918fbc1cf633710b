r"""Cost of every algorithm relative to FedAvg, scaling with the cohort and with the model; writes results.md.

  python -m benchmarks.scaling                      # the five sections, about 13 min on 2 cores
  python -m benchmarks.scaling --quick --output=/tmp/scaling.md
  python -m benchmarks.scaling --sections=cohorts   # replaces only that section of --output
  python -m benchmarks.scaling --helpfull          # every section's flags

Each section replaces its own part of `--output` (default benchmarks/results.md) and states the machine,
versions, repeats and date. Times are medians of repeats interleaved across everything compared in the
section (`timing.interleaved_medians`, one untimed warm-up call each), so drift in machine load hits all
alike and the ratios are fair; absolute times depend on the machine.

1. `algorithms` (`benchmarks/scaling_algorithms.py`): one round of every algorithm of the runner on the
   same cohort and initial model, time, CPU and peak memory as ratios to FedAvg.
2. `cohorts` (`benchmarks/scaling_cohorts.py`): time per client of FedAvg and RFA as the cohort grows from
   10 to 1000 clients, beside two floors of TFF's per-client cost, with a profile of where the time goes.
3. `model_size` (`benchmarks/scaling_model_size.py`): aggregation alone of client updates of 10^4 to 10^7
   parameters, every robust aggregator against the weighted mean, time and peak memory.
4. `quantile_passes` (`benchmarks/quantile_passes.py`): Delta-FL's secure quantile, passes per round against
   agreement with the exact filter, MM against the histogram search (NumPy references, seconds).
5. `passes` (`benchmarks/scaling_passes.py`): Fed+, RFA, personalized RFA and Delta-FL (secure quantile) at
   several counts of their dependent secure-sum passes beside FedAvg: each round split into a fixed part and
   a cost per pass.

Each section's module docstring says exactly what it measures and how.
"""

import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top,unused-import  (before absl.app.run: Keras)

from benchmarks import quantile_passes  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_algorithms  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_cohorts  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_model_size  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_passes  # pylint: disable=g-import-not-at-top
from benchmarks import scaling_report  # pylint: disable=g-import-not-at-top
from tff_robust.command_line import finite_flags  # pylint: disable=g-import-not-at-top
from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top

SECTIONS = {'algorithms': scaling_algorithms.section, 'cohorts': scaling_cohorts.section,
            'model_size': scaling_model_size.section, 'quantile_passes': quantile_passes.section,
            'passes': scaling_passes.section}
_DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results.md')

_SECTIONS = flags.DEFINE_multi_enum('sections', list(SECTIONS), list(SECTIONS), 'Sections to run (repeatable).')
_OUTPUT = flags.DEFINE_string('output', _DEFAULT_OUTPUT, 'Markdown file whose sections are replaced.')


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  start = time.perf_counter()
  for name, section in SECTIONS.items():
    if name in _SECTIONS.value:
      body = section()
      scaling_report.write(_OUTPUT.value, {name: body}, tuple(SECTIONS))  # saved as soon as it is done
      print(body, '\n', flush=True)
  execution_context.stop_local_execution_context()
  print(f'Wrote {_OUTPUT.value} in {time.perf_counter() - start:.0f} s')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)

"""The backdoor table and figure of a robustness sweep's results.csv, and (on validation runs) the choice of each
defence family's hyperparameters.

  python -m experiments.backdoor_report --results=DIR/results.csv
      # DIR/backdoor.md (experiments.backdoor_tables) and DIR/backdoor_asr.png (experiments.backdoor_figure)
  python -m experiments.backdoor_report --results=VALIDATION/results.csv --choose_fraction=0.1 \
      [--tolerance=0.05] [--chosen=VALIDATION/chosen.txt]
      # also VALIDATION/choice.md (experiments.backdoor_choice) and chosen.txt: the chosen spec of every family of
      # defence chains, one a line, in the order the sweep listed them (what a test-split sweep's --defences takes,
      # joined by ';'); the sweep's algorithms (e.g. fedavg as a reference) are in choice.md only

The results may be those of a sweep still running. A results file without any targeted attack (at
--choose_fraction, for the choice) is refused: there is no attack success rate to report. Imports no TensorFlow.
"""

import csv
import os

from absl import app
from absl import flags

from experiments import backdoor_choice
from experiments import backdoor_figure
from experiments import backdoor_tables
from tff_robust.command_line import finite_flags
from tff_robust.simulation import algorithm_names

_RESULTS = flags.DEFINE_string('results', None, 'A results.csv of experiments.robustness_sweep, finished or not.')
_OUTPUT = flags.DEFINE_string('output', None, 'The tables (markdown); default: backdoor.md beside --results.')
_FIGURE = flags.DEFINE_string('figure', None, 'The figure (PNG); default: backdoor_asr.png beside --results.')
_CHOOSE_FRACTION = flags.DEFINE_float(
    'choose_fraction', None,
    'Also choose each defence family\'s hyperparameters at this rho (validation runs): choice.md and --chosen.',
    lower_bound=0.0, upper_bound=1.0,
)
_TOLERANCE = flags.DEFINE_float(
    'tolerance', backdoor_choice.TOLERANCE,
    'The choice: eligible are the settings whose worst ASR is within this of their family\'s lowest.', lower_bound=0.0,
)
_CHOSEN = flags.DEFINE_string('chosen', None, 'The chosen specs, one a line; default: chosen.txt beside --results.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected positional arguments: {argv[1:]}')
  if not _RESULTS.value or not os.path.isfile(_RESULTS.value):
    raise app.UsageError(f'--results must be an existing results.csv file, got {_RESULTS.value!r}')
  with open(_RESULTS.value, newline='') as f:
    rows = list(csv.DictReader(f))
  directory = os.path.dirname(_RESULTS.value)
  written = [_OUTPUT.value or os.path.join(directory, 'backdoor.md'),
             _FIGURE.value or os.path.join(directory, 'backdoor_asr.png')]
  try:
    chosen = None
    if _CHOOSE_FRACTION.value is not None:
      chosen = backdoor_choice.choose(rows, _CHOOSE_FRACTION.value, _TOLERANCE.value)
      table = backdoor_choice.choice_table(rows, _CHOOSE_FRACTION.value, _TOLERANCE.value)
    backdoor_tables.write_backdoor_tables(rows, written[0])
  except ValueError as error:
    raise app.UsageError(f'--results={_RESULTS.value}: {error}') from None
  backdoor_figure.plot(rows, written[1])
  if chosen is not None:
    written += [os.path.join(directory, 'choice.md'), _CHOSEN.value or os.path.join(directory, 'chosen.txt')]
    with open(written[2], 'w') as f:
      f.write(table)
    with open(written[3], 'w') as f:
      f.write(''.join(f'{candidate.defence}\n' for candidate in chosen.values()
                      if candidate.defence not in algorithm_names.ALGORITHM_NAMES))
    print(table)
  print(f'{len(rows)} runs; wrote {", ".join(written)}')


if __name__ == '__main__':
  app.run(main, flags_parser=finite_flags.parse_flags)

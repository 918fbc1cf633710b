"""`experiments.backdoor_report` on hand-made results files: the table, figure and validation choice it writes, and a
results file without any targeted attack refused by name."""

import csv

from tests import fork_server
from tff_robust.core.attacks import targeted_catalog
from tests.experiments import test_backdoor_tables


def _write(path, rows):
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)


def test_the_report_writes_the_table_figure_and_the_chosen_defence_chains(tmp_path):
  _write(tmp_path / 'results.csv', test_backdoor_tables._validation_rows())  # pylint: disable=protected-access
  result = fork_server.python_m('experiments.backdoor_report',
                                [f'--results={tmp_path}/results.csv', '--choose_fraction=0.1'], timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert '| weak_dp | weak_dp(m=1.0,sigma=0.01) |' in (tmp_path / 'choice.md').read_text()
  # one chosen chain per family, in the sweep's order; fedavg (an algorithm) and flame (no complete run) are not
  assert (tmp_path / 'chosen.txt').read_text() == 'weak_dp(m=1.0,sigma=0.01)\nrlr(theta=2)>mean\n'
  assert '## rho = 0.1' in (tmp_path / 'backdoor.md').read_text()
  assert (tmp_path / 'backdoor_asr.png').stat().st_size > 10_000


def test_a_results_file_without_a_targeted_attack_is_refused(tmp_path):
  rows = [test_backdoor_tables._row('fedavg', 'none', 0.0, 0, 0.93),  # pylint: disable=protected-access
          test_backdoor_tables._row('fedavg', 'omniscient', 0.1, 0, 0.1)]  # pylint: disable=protected-access
  _write(tmp_path / 'results.csv', rows)
  result = fork_server.python_m('experiments.backdoor_report', [f'--results={tmp_path}/results.csv'], timeout=300)
  assert result.returncode != 0
  names = ', '.join(targeted_catalog.TARGETED_ATTACK_NAMES)
  assert f'rows hold no targeted attack ({names}): a backdoor table needs one' in result.stderr
  assert not (tmp_path / 'backdoor.md').exists()

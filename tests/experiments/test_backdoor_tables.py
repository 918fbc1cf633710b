"""`backdoor_tables`, `backdoor_choice` and `backdoor_figure` on hand-made results.csv rows: the worst ASR is the
largest mean over seeds and names its attack, values are mean [min, max] over seeds, accuracy and ASR are taken at
the attack's end, missing runs say so, and the validation choice follows its stated criterion."""

import csv
import dataclasses

import pytest

from experiments import backdoor_choice
from experiments import backdoor_figure
from experiments import backdoor_tables

_BD = 'backdoor'
_MR = 'model_replacement(boost=5)'


def _row(defence, kind, fraction, seed, accuracy, asr=None, *, end=None, asr_after=None, final_accuracy=0.5):
  """A sweep row. With `end` (a sweep with rounds_after_attack = 20, attack_end_round = 30) `accuracy`/`asr` are
  the evaluation at round 30 and `asr_after` the final ASR; without it they are the final evaluation's."""
  windowed = end is not None
  return dict(
      algorithm=defence, corruption=kind, fraction=fraction, seed=seed, calls_per_round=1.0,
      accuracy=final_accuracy if windowed else accuracy, loss=0.3, corruption_weight_share=fraction,
      attack_success_rate=(asr_after if windowed else asr) if asr is not None else '',
      rounds_after_attack=20 if windowed else '', attack_end_round=30 if windowed else '',
      accuracy_at_attack_end=accuracy if windowed else '',
      attack_success_rate_at_attack_end=asr if windowed and asr is not None else '',
  )


def _windowed_rows():
  """FedAvg: backdoor ASR 0.5/0.7 (mean 0.6), model replacement 0.9/1.0 (0.95): its worst; RLR: backdoor 0.3/0.5
  (0.4), model replacement 0.1/0.1: its worst is the backdoor. Final accuracy (0.5) differs from the round-30 one."""
  w = dict(end=30)
  return [
      _row('fedavg', 'none', 0.0, 0, 0.90, **w), _row('fedavg', 'none', 0.0, 1, 0.92, **w),
      _row('fedavg', _BD, 0.1, 0, 0.88, 0.5, asr_after=0.2, **w),
      _row('fedavg', _BD, 0.1, 1, 0.86, 0.7, asr_after=0.4, **w),
      _row('fedavg', _MR, 0.1, 0, 0.70, 0.9, asr_after=0.6, **w),
      _row('fedavg', _MR, 0.1, 1, 0.74, 1.0, asr_after=0.8, **w),
      _row('fedavg', 'omniscient', 0.1, 0, 0.10, **w),  # an untargeted attack: not in the backdoor table
      _row('rlr(theta=4)>mean', 'none', 0.0, 0, 0.90, **w), _row('rlr(theta=4)>mean', 'none', 0.0, 1, 0.90, **w),
      _row('rlr(theta=4)>mean', _BD, 0.1, 0, 0.89, 0.3, asr_after=0.1, **w),
      _row('rlr(theta=4)>mean', _BD, 0.1, 1, 0.87, 0.5, asr_after=0.3, **w),
      _row('rlr(theta=4)>mean', _MR, 0.1, 0, 0.85, 0.1, asr_after=0.0, **w),
      _row('rlr(theta=4)>mean', _MR, 0.1, 1, 0.85, 0.1, asr_after=0.0, **w),
  ]


def _table_row(table: str, defence: str, occurrence: int = 0) -> list[str]:
  """The cells of `defence`'s row in the `occurrence`-th table of `table`."""
  rows = [line for line in table.splitlines() if line.startswith(f'| {defence} |')]
  return [cell.strip() for cell in rows[occurrence].strip('|').split('|')]


def test_the_worst_asr_is_the_largest_mean_over_seeds_and_names_its_attack():
  worst = backdoor_tables.worst_asr(_windowed_rows(), 0.1)
  attack, cell = worst['fedavg']
  assert attack == _MR
  assert dataclasses.astuple(cell[backdoor_tables.ASR]) == pytest.approx((0.95, 0.9, 1.0, 2))
  assert dataclasses.astuple(cell[backdoor_tables.ACCURACY]) == pytest.approx((0.72, 0.70, 0.74, 2))
  assert dataclasses.astuple(cell[backdoor_tables.ASR_AFTER]) == pytest.approx((0.7, 0.6, 0.8, 2))
  assert worst['rlr(theta=4)>mean'][0] == _BD
  assert worst['rlr(theta=4)>mean'][1][backdoor_tables.ASR].mean == pytest.approx(0.4)


def test_the_table_shows_means_with_min_max_at_the_attacks_end_and_the_durability():
  table = backdoor_tables.backdoor_table(_windowed_rows(), 0.1)
  assert 'over 2 seeds at rho = 0.1' in table and 'ASR 20 rounds after the attackers stop' in table
  # defence, calls, clean (round 30, not the final 0.5), worst ASR, attack, accuracy there, ASR 20 rounds later
  assert _table_row(table, 'fedavg') == [
      'fedavg', '1', '0.910 [0.900, 0.920]', '**0.950 [0.900, 1.000]**', _MR, '0.720 [0.700, 0.740]',
      '0.700 [0.600, 0.800]']
  assert _table_row(table, 'rlr(theta=4)>mean')[3:5] == ['**0.400 [0.300, 0.500]**', _BD]
  # every attack: accuracy, ASR, ASR +20 (attacks sorted: backdoor first)
  assert _table_row(table, 'fedavg', 1) == [
      'fedavg', '0.870 [0.860, 0.880]', '0.600 [0.500, 0.700]', '0.300 [0.200, 0.400]',
      '0.720 [0.700, 0.740]', '0.950 [0.900, 1.000]', '0.700 [0.600, 0.800]']
  assert 'omniscient' not in table


def test_missing_runs_and_fewer_seeds_say_so():
  rows = _windowed_rows() + [
      _row('flame', 'none', 0.0, 0, 0.91, end=30), _row('flame', 'none', 0.0, 1, 0.93, end=30),
      _row('flame', _BD, 0.1, 0, 0.90, 0.25, asr_after=0.05, end=30),  # seed 1 and model replacement missing
  ]
  table = backdoor_tables.backdoor_table(rows, 0.1)
  assert _table_row(table, 'flame') == ['flame', '1', '0.920 [0.910, 0.930]', f'- (missing: {_MR})', '-', '-', '-']
  assert _table_row(table, 'flame', 1) == ['flame', '0.900 (1 seed)', '0.250 (1 seed)', '0.050 (1 seed)',
                                           '-', '-', '-']
  assert 'flame' not in backdoor_tables.worst_asr(rows, 0.1)


def test_without_an_attack_window_the_final_evaluation_counts_and_there_is_no_durability_column():
  rows = [_row('fedavg', 'none', 0.0, 0, 0.93), _row('fedavg', _BD, 0.05, 0, 0.92, 0.81)]
  table = backdoor_tables.backdoor_table(rows, 0.05)
  assert _table_row(table, 'fedavg') == ['fedavg', '1', '0.930', '**0.810**', _BD, '0.920']
  assert 'rounds after' not in table and backdoor_tables.rounds_after_attack(rows) is None


def test_rows_read_back_from_a_results_file_give_the_same_tables(tmp_path):
  rows = _windowed_rows()
  path = tmp_path / 'results.csv'
  with open(path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  with open(path, newline='') as f:
    as_text = list(csv.DictReader(f))
  assert backdoor_tables.backdoor_table(as_text, 0.1) == backdoor_tables.backdoor_table(rows, 0.1)
  backdoor_tables.write_backdoor_tables(as_text, str(tmp_path / 'backdoor.md'))
  assert (tmp_path / 'backdoor.md').read_text().count('## rho = 0.1') == 1


def test_rows_without_a_targeted_attack_are_refused():
  rows = [_row('fedavg', 'none', 0.0, 0, 0.93), _row('fedavg', 'omniscient', 0.1, 0, 0.1)]
  with pytest.raises(ValueError, match='no targeted attack .*backdoor, model_replacement'):
    backdoor_tables.write_backdoor_tables(rows, '/nonexistent/backdoor.md')
  with pytest.raises(ValueError, match='no targeted attack'):
    backdoor_tables.backdoor_table(_windowed_rows(), 0.2)  # none at that rho
  with pytest.raises(ValueError, match='nothing to choose by'):
    backdoor_choice.choose(rows, 0.1)


def _validation_rows():
  """weak_dp: m=0.5 worst 0.10 (clean 0.85), m=1 worst 0.14 (0.90), m=2 worst 0.30 (0.93); rlr: theta=2 worst
  0.50, theta=4 worst 0.52, both clean 0.91; flame lacks model replacement. One seed."""
  rows = []
  for defence, clean, bd, mr in (('weak_dp(m=0.5,sigma=0.01)', 0.85, 0.10, 0.05),
                                 ('weak_dp(m=1.0,sigma=0.01)', 0.90, 0.02, 0.14),
                                 ('weak_dp(m=2.0,sigma=0.01)', 0.93, 0.30, 0.20),
                                 ('rlr(theta=2)>mean', 0.91, 0.50, 0.10),
                                 ('rlr(theta=4)>mean', 0.91, 0.52, 0.10),
                                 ('flame', 0.95, 0.01, None),
                                 ('fedavg', 0.93, 0.90, 0.99)):
    rows += [_row(defence, 'none', 0.0, 0, clean), _row(defence, _BD, 0.1, 0, 0.8, bd)]
    if mr is not None:
      rows.append(_row(defence, _MR, 0.1, 0, 0.8, mr))
  return rows


def test_the_choice_is_the_most_accurate_setting_within_the_tolerance_of_the_lowest_worst_asr():
  chosen = backdoor_choice.choose(_validation_rows(), 0.1)
  # weak_dp: lowest worst 0.10; within 0.05: m=0.5 (0.10) and m=1 (0.14, its worst is model replacement); m=1 is
  # more accurate. m=2 (0.30) is out although the most accurate.
  assert chosen['weak_dp'].defence == 'weak_dp(m=1.0,sigma=0.01)' and chosen['weak_dp'].attack == _MR
  assert (chosen['weak_dp'].accuracy, chosen['weak_dp'].worst_asr) == pytest.approx((0.90, 0.14))
  # rlr: equal accuracy, so the lower worst ASR (theta=2)
  assert chosen['rlr>mean'].defence == 'rlr(theta=2)>mean'
  assert 'flame' not in chosen  # its only setting misses an attack
  assert chosen['fedavg'].defence == 'fedavg'
  # with no tolerance only the lowest worst ASR is eligible
  assert backdoor_choice.choose(_validation_rows(), 0.1, tolerance=0)['weak_dp'].defence == 'weak_dp(m=0.5,sigma=0.01)'


def test_the_choice_table_lists_every_candidate():
  table = backdoor_choice.choice_table(_validation_rows(), 0.1)
  assert '| weak_dp | weak_dp(m=1.0,sigma=0.01) | 0.900 | 0.140 | model_replacement(boost=5) | yes | **yes** |' in table
  assert '| weak_dp | weak_dp(m=2.0,sigma=0.01) | 0.930 | 0.300 | backdoor | no |  |' in table
  assert '| flame | flame | 0.950 | - | - | no (runs missing) | |' in table


@pytest.mark.parametrize('defence, family', [
    ('rlr(theta=4)>weak_dp(m=1.0,sigma=0.01)', 'rlr>weak_dp'), ('flame', 'flame'), ('rlr>mean', 'rlr>mean')])
def test_family_drops_the_parameters(defence, family):
  assert backdoor_choice.family(defence) == family


def test_the_figure_is_drawn(tmp_path):
  path = tmp_path / 'backdoor_asr.png'
  backdoor_figure.plot(_windowed_rows(), str(path))
  assert path.stat().st_size > 10_000

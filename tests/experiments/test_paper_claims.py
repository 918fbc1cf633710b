"""experiments/paper_claims.py: each claim's verdict on small sets of records, at and beside its criterion's edge."""

import pytest

from experiments import paper_claims
from experiments import paper_tables

_TASK = 'shakespeare_lstm_rfa'


def _rfa(algorithm, corruption, fraction, accuracies):
  """One record per seed of an RFA-layout cell."""
  return [paper_tables.Record('rfa', _TASK, algorithm, seed, corruption, fraction, accuracy=accuracy,
                              source=f'{algorithm}_{corruption}_{fraction}_{seed}')
          for seed, accuracy in enumerate(accuracies)]


def _clean(rfa, fedavg):
  return _rfa('rfa', 'none', 0.0, rfa) + _rfa('fedavg', 'none', 0.0, fedavg)


def _verdicts(records, claim_prefix):
  return [v for v in paper_claims.rfa_verdicts(records) if v.claim.startswith(claim_prefix)]


@pytest.mark.parametrize('rfa, verdict', [(0.4965, 'holds'), (0.4955, 'does not hold'), (0.5045, 'does not hold')])
def test_the_clean_claim_holds_within_0_4_points_of_fedavg(rfa, verdict):
  [clean] = _verdicts(_clean([rfa], [0.5]), 'clean')
  assert clean.verdict == verdict and clean.where == f'{_TASK}, no corruption'


def test_the_clean_claim_is_judged_once_per_task_whatever_the_corruption_tables():
  records = (_clean([0.5], [0.5]) + _rfa('rfa', 'omniscient', 0.25, [0.45]) + _rfa('fedavg', 'omniscient', 0.25, [0.2])
             + _rfa('rfa', 'data', 0.25, [0.48]) + _rfa('fedavg', 'data', 0.25, [0.49]))
  claims = [v.claim for v in paper_claims.rfa_verdicts(records)]
  assert sum(claim.startswith('clean') for claim in claims) == 1 and len(claims) == 3


@pytest.mark.parametrize('rfa_attacked, fedavg_attacked, verdict', [
    (0.41, 0.24, 'holds'),  # RFA keeps 82% of 0.5, FedAvg 48%
    (0.39, 0.24, 'does not hold'),  # RFA keeps 78%
    (0.45, 0.26, 'does not hold'),  # FedAvg keeps 52%: not a collapse
])
def test_the_omniscient_claim_needs_rfa_to_keep_80_percent_and_fedavg_to_keep_under_half(
    rfa_attacked, fedavg_attacked, verdict):
  records = (_clean([0.5], [0.5]) + _rfa('rfa', 'omniscient', 0.25, [rfa_attacked])
             + _rfa('fedavg', 'omniscient', 0.25, [fedavg_attacked]))
  [omniscient] = _verdicts(records, 'omniscient')
  assert omniscient.verdict == verdict and omniscient.claim.startswith('omniscient ρ=0.25')


def test_each_corrupted_rho_gets_its_verdict_and_a_missing_cell_is_named():
  records = (_clean([0.5], [0.5]) + _rfa('rfa', 'omniscient', 0.1, [0.48]) + _rfa('fedavg', 'omniscient', 0.1, [0.2])
             + _rfa('fedavg', 'omniscient', 0.25, [0.18]))
  by_rho = {v.claim.split(':')[0]: v.verdict for v in _verdicts(records, 'omniscient')}
  assert by_rho == {'omniscient ρ=0.1': 'holds', 'omniscient ρ=0.25': 'not measured: no run of RFA at ρ=0.25'}


def test_the_data_claim_compares_the_gap_with_the_larger_std_and_needs_two_seeds():
  clean = _clean([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
  # RFA 0.40 ± 0.0163 (population std of 0.38, 0.40, 0.42), FedAvg 0.42 ± 0: a gap of 2 points > 1.63.
  apart = clean + _rfa('rfa', 'data', 0.25, [0.38, 0.40, 0.42]) + _rfa('fedavg', 'data', 0.25, [0.42] * 3)
  close = clean + _rfa('rfa', 'data', 0.25, [0.38, 0.40, 0.42]) + _rfa('fedavg', 'data', 0.25, [0.41] * 3)
  one_seed = clean + _rfa('rfa', 'data', 0.25, [0.40]) + _rfa('fedavg', 'data', 0.25, [0.40])
  assert [v.verdict for v in _verdicts(apart, 'data')] == ['does not hold']
  assert [v.verdict for v in _verdicts(close, 'data')] == ['holds']
  assert [v.verdict for v in _verdicts(one_seed, 'data')] == [
      'not measured: a standard deviation needs >= 2 seeds a cell']


def _dfl(algorithm, theta, p90s, means):
  return [paper_tables.Record('dfl', 'shakespeare_gru_dfl', algorithm, seed, conformity_level=theta, error_p90=p90,
                              error_mean=mean, source=f'{algorithm}_{theta}_{seed}')
          for seed, (p90, mean) in enumerate(zip(p90s, means))]


@pytest.mark.parametrize('p90s, means, verdict', [
    ([0.58, 0.58], [0.555, 0.555], 'holds'),  # p90 better, mean +0.5 points
    ([0.605, 0.605], [0.55, 0.55], 'holds'),  # p90 worse by 0.5 point, within the larger std (FedAvg's, 1)
    ([0.62, 0.62], [0.55, 0.55], 'does not hold'),  # p90 worse by 2 points
    ([0.58, 0.58], [0.565, 0.565], 'does not hold'),  # mean +1.5 points
])
def test_the_delta_fl_claim_keeps_the_p90_within_a_std_and_the_mean_within_a_point(p90s, means, verdict):
  records = _dfl('fedavg', 1.0, [0.59, 0.61], [0.55, 0.55]) + _dfl('delta_fl', 0.5, p90s, means)
  [claim] = paper_claims.dfl_verdicts(records)
  assert claim.verdict == verdict and claim.where == 'shakespeare_gru_dfl'


def test_the_delta_fl_claim_with_one_seed_or_without_theta_0_5_is_not_measured():
  fedavg = _dfl('fedavg', 1.0, [0.6], [0.55])
  assert [v.verdict for v in paper_claims.dfl_verdicts(fedavg + _dfl('delta_fl', 0.5, [0.58], [0.55]))] == [
      'not measured: a standard deviation needs >= 2 seeds a cell']
  assert [v.verdict for v in paper_claims.dfl_verdicts(fedavg + _dfl('delta_fl', 0.8, [0.58], [0.55]))] == [
      'not measured: no run of Δ-FL θ=0.5']


def test_the_markdown_has_a_row_per_verdict_and_no_stray_table_separator():
  records = _clean([0.5], [0.5]) + _rfa('rfa', 'omniscient', 0.25, [0.45]) + _rfa('fedavg', 'omniscient', 0.25, [0.2])
  text = paper_claims.claims_markdown(paper_claims.rfa_verdicts(records))
  rows = [line for line in text.splitlines() if line.startswith('| ') and '**' in line]
  assert len(rows) == 2 and all(row.count('|') == 7 for row in rows)
  assert '**holds**' in rows[0] and 'RFA 50.00, FedAvg 50.00 (1 / 1 seeds): +0.00' in rows[0]


def test_beside_each_verdict_stands_what_the_paper_reports_for_the_tasks_dataset():
  rfa_records = (_clean([0.5], [0.5]) + _rfa('rfa', 'omniscient', 0.25, [0.45])
                 + _rfa('fedavg', 'omniscient', 0.25, [0.2]) + _rfa('rfa', 'data', 0.25, [0.48])
                 + _rfa('fedavg', 'data', 0.25, [0.49]))
  papers = {v.claim.split(' ')[0]: v.paper for v in paper_claims.rfa_verdicts(rfa_records)}
  assert papers['clean:'] == 'gap < 0.4' and papers['data'] == 'within one std'
  assert "'similar trend'" in papers['omniscient'] and len(papers) == 3
  # Table 2 (p90) and Table 3 (mean) of the Delta-FL paper, Shakespeare RNN: theta = 0.5 against FedAvg.
  [dfl] = paper_claims.dfl_verdicts(_dfl('fedavg', 1.0, [0.6], [0.55]) + _dfl('delta_fl', 0.5, [0.58], [0.55]))
  assert dfl.paper == 'p90 46.32 vs 46.45, mean 43.13 vs 42.90'
  # A task of no paper dataset (digits stands in for EMNIST linear in the RFA layout; not in the Delta-FL one).
  digits = [paper_tables.Record('dfl', 'digits', algorithm, 0, conformity_level=theta, error_p90=0.5, error_mean=0.4,
                                source=algorithm) for algorithm, theta in (('fedavg', 1.0), ('delta_fl', 0.5))]
  assert [v.paper for v in paper_claims.dfl_verdicts(digits)] == ['—']


def test_the_paper_column_comes_from_the_published_numbers_given_and_a_file_without_claim_texts_gives_dashes():
  records = _clean([0.5], [0.5])
  own = paper_tables.load_published()
  own['rfa']['fig2_claims_text'] = {'clean': {'shakespeare_lstm': 'own text'}}
  assert [v.paper for v in paper_claims.rfa_verdicts(records, own)] == ['own text']
  del own['rfa']['fig2_claims_text']
  assert [v.paper for v in paper_claims.rfa_verdicts(records, own)] == ['—']

"""The markdown of benchmarks.scaling on made-up measurements (benchmarks themselves are never timed in tests)."""

from benchmarks import scaling_report


def test_sections_are_written_and_a_later_subset_replaces_only_its_own():
  first = scaling_report.merge('', {
      'algorithms': scaling_report.table(['algorithm', 'round (s)', '/ FedAvg'], [
          ['fedavg', '0.200', scaling_report.ratio(0.2, 0.2)],
          ['rfa', '0.300', scaling_report.ratio(0.3, 0.2)],
          ['tiny', '0.000', scaling_report.ratio(1.0, 0.01, min_baseline=0.05)],
      ]),
      'model_size': 'old model-size table',
  }, ('algorithms', 'cohorts', 'model_size'))
  assert first.startswith(scaling_report.TITLE)
  assert '| --- | ---: | ---: |' in first
  assert '| rfa | 0.300 | 1.50 |' in first
  assert '| tiny | 0.000 | n/a |' in first
  assert first.index('<!-- begin section: algorithms -->') < first.index('<!-- begin section: model_size -->')

  second = scaling_report.merge(first, {'model_size': 'new model-size table', 'cohorts': 'cohort table'},
                                ('algorithms', 'cohorts', 'model_size'))
  assert '| rfa | 0.300 | 1.50 |' in second
  assert 'old model-size table' not in second and 'new model-size table' in second
  assert second.index('cohort table') < second.index('new model-size table')
  assert scaling_report.merge(second, {}, ('algorithms', 'cohorts', 'model_size')) == second


def test_text_outside_the_sections_is_kept_after_them():
  order = ('algorithms', 'cohorts')
  hand_written = '## 5. Two TFF workers vs one\n\nmeasured by hand'
  existing = scaling_report.merge('', {'algorithms': 'old table', 'cohorts': 'cohort table'}, order) + '\n' + hand_written
  updated = scaling_report.merge(existing, {'algorithms': 'new table'}, order)
  assert 'old table' not in updated and 'new table' in updated and 'cohort table' in updated
  assert updated.rstrip().endswith(hand_written)
  assert updated.count(scaling_report.TITLE) == 1 and updated.count(scaling_report.INTRO) == 1
  assert scaling_report.merge(updated, {}, order) == updated

"""`metrics_csv.keep_checkpointed_rounds`: a resumed run keeps the intact rows of its checkpointed rounds, drops a
damaged tail (a killed run's torn last line) with a one-line note, and refuses damage to the rows it keeps."""

import csv
import re

import pytest

from tff_robust.simulation import metrics_csv

_HEADER = 'round,train/loss,eval/accuracy'
_ROWS = ['1,2.5,', '2,2.25,0.5', '3,nan,', '4,1.75,0.625', '5,1.5,']


def _write(tmp_path, *lines) -> str:
  path = tmp_path / 'metrics.csv'
  path.write_bytes(('\n'.join(lines) + '\n').encode('utf-8', 'surrogateescape'))
  return str(path)


def _rows(path) -> list[list[str]]:
  with open(path, newline='') as f:
    return list(csv.reader(f))


def test_an_intact_file_keeps_the_rows_of_the_checkpointed_rounds_silently(tmp_path):
  path = _write(tmp_path, _HEADER, *_ROWS)
  assert metrics_csv.keep_checkpointed_rounds(path, 3) is None
  assert _rows(path) == [_HEADER.split(','), ['1', '2.5', ''], ['2', '2.25', '0.5'], ['3', 'nan', '']]


@pytest.mark.parametrize('tail', [
    '6,1.2',  # a row torn in the middle by SIGKILL
    'garbage',
    '6,1.25,0.7,9',  # one field too many
    '6,1.2\x00\x00\x00',  # NUL bytes of a half-written page
    '\udcff\udcfe,1,2',  # bytes that are not UTF-8
    'x6,1.0,',  # a round that is not a number
])
def test_a_damaged_last_line_is_dropped_with_one_line_saying_so(tmp_path, tail):
  path = _write(tmp_path, _HEADER, *_ROWS, tail)
  note = metrics_csv.keep_checkpointed_rounds(path, 5)
  assert '\n' not in note and 'dropped 1 damaged line(s) (line(s) 7' in note and 'rounds 1-5 are intact' in note
  assert [row[0] for row in _rows(path)] == ['round', '1', '2', '3', '4', '5']


def test_damaged_lines_after_the_checkpoint_go_with_the_rows_after_it(tmp_path):
  path = _write(tmp_path, _HEADER, *_ROWS[:3], 'garbage', *_ROWS[3:], '6,1')
  assert 'dropped 2 damaged line(s) (line(s) 5, 8' in metrics_csv.keep_checkpointed_rounds(path, 2)
  assert [row[0] for row in _rows(path)] == ['round', '1', '2']


@pytest.mark.parametrize('lines, last_round, message', [
    ((_HEADER, '1,2.5,', '2,x,0.5', '3,nan,'), 3, 'no intact row of round(s) 2'),
    ((_HEADER, '1,2.5,', '3,nan,'), 3, 'no intact row of round(s) 2'),
    ((_HEADER, *_ROWS[:2]), 4, 'no intact row of round(s) 3-4'),
    ((_HEADER, '1,2.5,', '2,2.25,0.5', '2,2.25,0.5'), 2, 'several rows of round(s) 2'),
    ((_HEADER, '2,2.25,0.5', '1,2.5,'), 2, 'out of order'),
    (('garbage', *_ROWS), 2, "not a header starting with 'round'"),
    ((), 1, "not a header starting with 'round'"),
])
def test_damage_to_the_checkpointed_rows_is_refused_in_one_line(tmp_path, lines, last_round, message):
  path = _write(tmp_path, *lines)
  before = (tmp_path / 'metrics.csv').read_bytes()
  with pytest.raises(metrics_csv.DamagedMetricsError, match=re.escape(message)) as refused:
    metrics_csv.keep_checkpointed_rounds(path, last_round)
  assert '\n' not in str(refused.value) and str(refused.value).startswith(f'{path} is damaged: ')
  assert str(refused.value).endswith('--overwrite starts the run afresh')
  assert (tmp_path / 'metrics.csv').read_bytes() == before  # left for inspection


def test_a_missing_file_is_refused(tmp_path):
  with pytest.raises(metrics_csv.DamagedMetricsError, match='cannot be read .* holds rounds 1-2'):
    metrics_csv.keep_checkpointed_rounds(str(tmp_path / 'metrics.csv'), 2)


def test_evaluation_at_reads_the_rounds_evaluation_or_the_last_one_before_it(tmp_path):
  path = _write(tmp_path, 'round,train/loss,eval/accuracy,eval/attack_success_rate',
                '1,2.5,,', '2,2.25,0.5,0.75', '3,2.0,,', '4,1.75,0.625,0.125', '5,1.5,0.875,')
  assert metrics_csv.evaluation_at(path, 4) == (4, {'eval/accuracy': 0.625, 'eval/attack_success_rate': 0.125})
  # round 3 was not evaluated: round 2's evaluation is the last at or before it
  assert metrics_csv.evaluation_at(path, 3) == (2, {'eval/accuracy': 0.5, 'eval/attack_success_rate': 0.75})
  assert metrics_csv.evaluation_at(path, 5) == (5, {'eval/accuracy': 0.875})
  assert metrics_csv.evaluation_at(path, 1) == (None, {})
  assert metrics_csv.evaluation_at(str(tmp_path / 'absent.csv'), 4) == (None, {})

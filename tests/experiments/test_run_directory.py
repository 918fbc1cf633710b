"""A run's directory holds one run: the same command resumes it (a larger --total_rounds continues it), a command
with other settings is refused in one line naming the flags, and --overwrite starts afresh."""

import json

import pytest

from tests.experiments import train_runs

_FLAGS = ('--task=digits', '--rounds_per_checkpoint=1', '--rounds_per_eval=2', '--clients_per_round=5')


@pytest.mark.slow
def test_a_run_resumes_only_under_the_settings_it_was_started_with(tmp_path):
  first = train_runs.train_here(tmp_path, *_FLAGS, '--algorithm=rfa', '--total_rounds=2')  # what it writes
  assert first.returncode == 0, first.stderr[-3000:]
  with open(tmp_path / 'run' / 'summary.json') as f:
    summary = f.read()

  for other, names in ((('--algorithm=rfa', '--corruption=data', '--corruption_fraction=0.25'),
                        ('--corruption was "none", now "data"', '--corruption_fraction was 0.0, now 0.25')),
                       (('--algorithm=fedavg',), ('--algorithm was "rfa", now "fedavg"',))):
    refused = train_runs.train(tmp_path, *_FLAGS, *other, '--total_rounds=2', timeout=120)
    assert refused.returncode == 2, refused.stderr[-3000:]
    (line,) = refused.stderr.splitlines()
    assert all(name in line for name in (*names, '--overwrite', '--experiment_name')), line
    with open(tmp_path / 'run' / 'summary.json') as f:
      assert f.read() == summary  # the run is untouched

  # A run recorded before a flag existed (an older version of the package) resumes when the flag is at its default.
  with open(tmp_path / 'run' / 'run_settings.json') as f:
    recorded = json.load(f)
  del recorded['bucket_size']
  with open(tmp_path / 'run' / 'run_settings.json', 'w') as f:
    json.dump(recorded, f)
  continued = train_runs.train(tmp_path, *_FLAGS, '--algorithm=rfa', '--total_rounds=3', '--rounds_per_eval=3')
  assert continued.returncode == 0, continued.stderr[-3000:]
  assert 'resumed from round 2 of 3' in continued.stdout
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['rounds'] == 3 and [row['round'] for row in rows] == ['1', '2', '3']

  fresh = train_runs.train(tmp_path, *_FLAGS, '--algorithm=rfa', '--corruption=data', '--corruption_fraction=0.25',
                           '--total_rounds=1', '--overwrite')
  assert fresh.returncode == 0, fresh.stderr[-3000:]
  assert 'resumed' not in fresh.stdout
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['corruption'] == 'data' and summary['corruption_fraction'] == 0.25
  assert [row['round'] for row in rows] == ['1']
  with open(tmp_path / 'run' / 'run_settings.json') as f:
    settings = json.load(f)
  assert settings['corruption'] == 'data' and 'total_rounds' not in settings and 'overwrite' not in settings


@pytest.mark.slow
def test_a_damaged_metrics_file_is_repaired_after_the_checkpoint_and_refused_before_it(tmp_path):
  first = train_runs.train_here(tmp_path, *_FLAGS, '--algorithm=fedavg', '--total_rounds=2')  # what it writes
  assert first.returncode == 0, first.stderr[-3000:]
  metrics = tmp_path / 'run' / 'metrics.csv'
  intact = metrics.read_text()
  metrics.write_text(intact + 'garb\n')  # a garbage last line (the issue's: the old code raised in int())

  resumed = train_runs.train(tmp_path, *_FLAGS, '--algorithm=fedavg', '--total_rounds=3')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'Traceback' not in resumed.stderr
  (note,) = [line for line in resumed.stderr.splitlines() if 'metrics.csv' in line]
  assert 'dropped 1 damaged line(s) (line(s) 4' in note and 'rounds 1-2 are intact' in note
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['rounds'] == 3 and [row['round'] for row in rows] == ['1', '2', '3']

  lines = metrics.read_text().splitlines()
  metrics.write_text('\n'.join([lines[0], lines[1][:len(lines[1]) // 2], *lines[2:]]) + '\n')  # round 1's row torn
  refused = train_runs.train(tmp_path, *_FLAGS, '--algorithm=fedavg', '--total_rounds=4', timeout=300)
  assert refused.returncode == 2, refused.stderr[-3000:]
  assert 'Traceback' not in refused.stderr
  (line,) = [line for line in refused.stderr.splitlines() if 'metrics.csv' in line]  # (and the GPU line)
  assert line.startswith('error: ') and 'metrics.csv is damaged' in line and 'round(s) 1' in line, line
  assert '--overwrite' in line


@pytest.mark.slow
def test_a_checkpointed_run_is_neither_cut_short_nor_restarted(tmp_path):
  first = train_runs.train_here(tmp_path, *_FLAGS, '--algorithm=fedavg', '--total_rounds=3', '--rounds_per_eval=3')
  assert first.returncode == 0, first.stderr[-3000:]
  summary, _ = train_runs.outputs(tmp_path)

  # Fewer rounds than the checkpoint reached: refused (it summarized round 2 beside round 3's model until 2026-12-05).
  refused = train_runs.train(tmp_path, *_FLAGS, '--algorithm=fedavg', '--total_rounds=2', '--rounds_per_eval=3',
                             timeout=120)
  assert refused.returncode == 2, refused.stderr[-3000:]
  assert 'Traceback' not in refused.stderr, refused.stderr[-3000:]
  line = refused.stderr.splitlines()[-1]  # after the worker's start-up notes
  assert '--total_rounds=2 is below the round this run has reached (3' in line, line
  assert train_runs.outputs(tmp_path)[0] == summary

  # Without --rounds_per_checkpoint the same run resumes (until 2026-12-05 it restarted from round 1).
  flags = [flag for flag in _FLAGS if not flag.startswith('--rounds_per_checkpoint')]
  continued = train_runs.train(tmp_path, *flags, '--algorithm=fedavg', '--total_rounds=4', '--rounds_per_eval=3')
  assert continued.returncode == 0, continued.stderr[-3000:]
  assert 'resumed from round 3 of 4' in continued.stdout
  summary, rows = train_runs.outputs(tmp_path)
  assert summary['rounds'] == 4 and [row['round'] for row in rows] == ['1', '2', '3', '4']

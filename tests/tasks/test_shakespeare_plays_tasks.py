"""The papers' Shakespeare tasks on the plays source (`shakespeare_source='plays'`), on hand-made play files:
windows against a NumPy construction, RFA's split within roles, Delta-FL's split by role, seeded."""

import pathlib
import string

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.simulation import corruption
from tff_robust import tasks
from tff_robust.tasks import shakespeare_papers
from tff_robust.tasks import shakespeare_plays

_CONFIG_DIR = pathlib.Path(__file__).resolve().parents[2] / 'experiments' / 'configs'
_TRAINING = dict(client_epochs=1, client_batch_size=8, seed=0)
_ALPHABET = list(string.ascii_letters + ",;'!-")
# Normalised text lengths of each role; a text of l characters has l - 20 examples, fewer than 100 are dropped.
_LENGTHS = {
    'first-play': {'ALPHA': 300, 'BETA': 250, 'SHORT': 119, 'EXACT': 120},
    'second-play': {'ALPHA': 220, 'GAMMA': 180, 'DELTA': 160, 'EPSILON & ZETA': 140},
}


def _random_text(rng, length: int) -> str:
  """`length` characters of random words (no leading, trailing or double spaces): no 21-gram repeats."""
  words = []
  while len(' '.join(words)) < length:
    words.append(''.join(rng.choice(_ALPHABET, size=rng.integers(1, 9))))
  text = ' '.join(words)[:length]
  return text[:-1] + 'z' if text.endswith(' ') else text


@pytest.fixture
def plays(tmp_path, monkeypatch):
  """{client id: normalised text}; the plays written as Markdown (speeches in two parts around a stage
  direction, 6 words a line) and `shakespeare_plays` pointed at them."""
  rng = np.random.default_rng(7)
  texts, paths = {}, []
  for play, lengths in _LENGTHS.items():
    speeches = []
    for role, length in lengths.items():
      texts[f'{play}:{role}'] = _random_text(rng, length)
      words = texts[f'{play}:{role}'].split(' ')
      lines = [' '.join(words[i:i + 6]) for i in range(0, len(words), 6)]
      half = len(lines) // 2
      speeches.append(f'**{role}**  \n' + '  \n'.join(lines[:half]) + '\n\n_Exit, with a flourish_\n\n'
                      + '  \n'.join(lines[half:]) + '\n')
    paths.append(tmp_path / f'{play}.md')
    paths[-1].write_text(f'# {play}\n\n## ACT I\n\n### SCENE I. A stage.\n\n' + '\n'.join(speeches), encoding='utf-8')
  monkeypatch.setattr(shakespeare_plays, 'play_files', lambda: paths)
  return texts


def _eligible(texts: dict) -> list[str]:
  return sorted(role for role, text in texts.items() if len(text) - 20 >= 100)


def _numpy_windows(text: str) -> np.ndarray:
  """[l - 20, 21] rows: 20 symbols, then the next; symbols ' A-Z a-z' -> 0..52, anything else 0."""
  ids = np.array([max(0, shakespeare_papers.VOCABULARY.find(c)) for c in text], np.int32)
  return np.lib.stride_tricks.sliding_window_view(ids, 21)


def _windows(client_data, role: str) -> np.ndarray:
  rows = [np.append(e['x'], e['y']) for e in client_data.create_tf_dataset_for_client(role).as_numpy_iterator()]
  return np.array(rows, np.int32).reshape(-1, 21)


def _test_data(task) -> list[str]:
  return task.device_evaluator._groups['eval'].client_data  # pylint: disable=protected-access


def test_windows_and_labels_equal_a_numpy_construction(plays):
  symbols = shakespeare_papers.load_plays()
  counts = {role: symbols.num_windows(role) for role in symbols.lengths}
  assert counts == {role: len(text) - 20 for role, text in plays.items()}  # the same name in two plays: two
  task = shakespeare_papers.create_dfl_task(shakespeare_source='plays', **_TRAINING)
  test_data = _test_data(task)
  assert sorted(task.train_data.client_ids + test_data.client_ids) == _eligible(plays)  # SHORT (99) dropped
  assert 'first-play:EXACT' in _eligible(plays)
  for client_data in (task.train_data, test_data):
    for role in client_data.client_ids:
      np.testing.assert_array_equal(_windows(client_data, role), _numpy_windows(plays[role]))


def test_rfa_split_is_within_each_role_and_no_test_window_is_trained_on(plays):
  task = shakespeare_papers.create_rfa_task(shakespeare_source='plays', **_TRAINING)
  assert task.train_data.client_ids == task.personal_test_data.client_ids == _eligible(plays)
  for role in _eligible(plays):
    expected = _numpy_windows(plays[role])
    train, test = _windows(task.train_data, role), _windows(task.personal_test_data, role)
    assert len(train) == len(expected) * 9 // 10 and len(train) + len(test) == len(expected)
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test]), axis=0), np.sort(expected, axis=0))
    assert not {tuple(w) for w in test} & {tuple(w) for w in train}, role


def test_rfa_evaluation_of_a_seeded_sample_of_roles_keeps_their_whole_test_parts(plays):
  full = shakespeare_papers.create_rfa_task(shakespeare_source='plays', **_TRAINING)
  sample = lambda: tasks.create_task('shakespeare_lstm_rfa', shakespeare_source='plays', max_evaluated_devices=3,
                                     **_TRAINING)
  task = sample()
  evaluated = task.personal_test_data.client_ids
  assert len(evaluated) == 3 and set(evaluated) < set(_eligible(plays)) and sample().personal_test_data.client_ids == evaluated
  assert task.train_data.client_ids == _eligible(plays)  # training keeps every role
  for role in evaluated:
    np.testing.assert_array_equal(_windows(task.personal_test_data, role), _windows(full.personal_test_data, role))


def test_rfa_split_is_fixed_by_split_seed(plays):
  split = lambda seed: [_windows(shakespeare_papers.create_rfa_task(split_seed=seed, **_TRAINING).train_data, role)
                        for role in _eligible(plays)]
  first, again, other = split(0), split(0), split(1)
  assert all(np.array_equal(a, b) for a, b in zip(first, again))
  assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_delta_fl_split_is_by_role_and_fixed_by_split_seed(plays):
  def split(seed):
    task = tasks.create_task('shakespeare_gru_dfl', shakespeare_source='plays', split_seed=seed, **_TRAINING)
    return tuple(task.train_data.client_ids), tuple(_test_data(task).client_ids)

  train, test = split(0)
  assert not set(train) & set(test) and sorted(train + test) == _eligible(plays)
  assert (len(train), len(test)) == (3, 4)  # 7 roles kept: the paper's 544 / 545 rounding
  assert split(0) == (train, test)
  assert any(split(seed) != (train, test) for seed in (1, 2, 3))


def test_an_unknown_source_is_refused_naming_the_option():
  with pytest.raises(ValueError, match=r"shakespeare_source must be one of \('plays', 'tff'\), got 'leaf'"):
    shakespeare_papers.create_rfa_task(shakespeare_source='leaf', **_TRAINING)


@pytest.mark.parametrize('config', ['rfa/fig2_shakespeare_lstm_data_corruption.cfg',
                                    'superquantile_fl/table2_3_shakespeare_rnn.cfg'])
def test_the_papers_flagfile_runs_a_round_on_the_plays_offline(config, plays, tmp_path, monkeypatch):
  # The runner as the README runs it, with the flagfile and --shakespeare_source=plays, on the hand-made plays
  # (the full corpus takes minutes per round on 2 cores); one round, a cohort of 2.
  import json  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import train  # pylint: disable=g-import-not-at-top
  from tff_robust.runtime import execution_context  # pylint: disable=g-import-not-at-top

  # The session's TFF worker (tests/conftest.py) runs the computations: the runner must not replace or stop it.
  monkeypatch.setattr(execution_context, 'set_local_execution_context', lambda **kwargs: None)
  monkeypatch.setattr(execution_context, 'stop_local_execution_context', lambda: None)
  flags.FLAGS.unparse_flags()
  try:
    flags.FLAGS(['train', f'--flagfile={_CONFIG_DIR / config}', '--shakespeare_source=plays',
                 '--total_rounds=1', '--clients_per_round=2', '--rounds_per_eval=1', '--noprogress_bar',
                 f'--root_output_dir={tmp_path}', '--experiment_name=run'])
    train.main(['train'])
  finally:
    flags.FLAGS.unparse_flags()
  with open(tmp_path / 'run' / 'summary.json') as f:
    summary = json.load(f)
  assert summary['rounds'] == 1 and summary['task'].startswith('shakespeare_')
  assert 0 <= summary['eval/accuracy'] <= 1


@pytest.mark.parametrize('name', ['shakespeare_lstm_rfa', 'shakespeare_gru_dfl'])
def test_client_datasets_know_their_cardinality_the_number_of_windows_produced(name, plays):
  # A known cardinality is what lets `corruption.client_example_counts` skip iterating the full corpus.
  task = tasks.create_task(name, shakespeare_source='plays', **_TRAINING)
  test_data = task.personal_test_data if name == 'shakespeare_lstm_rfa' else _test_data(task)
  for client_data in (task.train_data, test_data):
    for role in client_data.client_ids:
      cardinality = int(client_data.create_tf_dataset_for_client(role).cardinality())
      assert cardinality == len(_windows(client_data, role)) > 0, role


@pytest.mark.parametrize('name', ['shakespeare_lstm_rfa', 'shakespeare_gru_dfl'])
def test_client_datasets_are_the_roles_windows_in_memory_and_serialise_small(name, plays):
  # A client's dataset holds its own windows as a constant (no map to trace or instantiate per client, as the
  # text -> windows -> split pipeline was): what TFF serialises into each client's call is that role's data.
  task = tasks.create_task(name, shakespeare_source='plays', **_TRAINING)
  for role in task.train_data.client_ids:
    dataset = task.train_data.create_tf_dataset_for_client(role)
    graph = tf.compat.v1.GraphDef.FromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=tf.data.experimental.to_variant(dataset)).numpy()
    )
    assert {node.op for node in graph.node} <= {'Const', 'TensorSliceDataset', '_Retval', 'Identity'}, role
    assert not graph.library.function, role


@pytest.mark.parametrize('name', ['shakespeare_lstm_rfa', 'shakespeare_gru_dfl'])
def test_string_tensor_datasets_equal_the_per_client_datasets(name, plays):
  # `serializable_dataset_fn` of a string tensor (TFF's all-clients dataset, the per-device evaluator) serves
  # the same windows as `create_tf_dataset_for_client`.
  task = tasks.create_task(name, shakespeare_source='plays', **_TRAINING)
  data = task.train_data
  by_tensor = tf.function(lambda role: data.serializable_dataset_fn(role).batch(10**6).get_single_element())
  for role in data.client_ids:
    element = by_tensor(tf.constant(role))
    rows = np.concatenate([element['x'].numpy(), element['y'].numpy()[:, np.newaxis]], axis=1)
    np.testing.assert_array_equal(rows, _windows(data, role))
  pooled = list(data.create_tf_dataset_from_all_clients(seed=0).as_numpy_iterator())
  assert len(pooled) == sum(len(_windows(data, role)) for role in data.client_ids)


def test_corruption_counts_of_the_windows_equal_their_datasets_lengths(plays):
  # Read from the windows held in memory (no dataset built per role): the counts that choose corrupted roles.
  task = tasks.create_task('shakespeare_lstm_rfa', shakespeare_source='plays', **_TRAINING)
  counts = corruption.client_example_counts(task)
  assert counts == tuple(len(_windows(task.train_data, role)) for role in task.train_data.client_ids)


def _rows(windows: np.ndarray) -> set:
  return {tuple(w) for w in windows}


def test_rfa_validation_holds_a_fifth_of_each_roles_training_part_and_replaces_its_test_part(plays):
  plain = shakespeare_papers.create_rfa_task(shakespeare_source='plays', **_TRAINING)
  task = tasks.create_task('shakespeare_lstm_rfa', shakespeare_source='plays', validation_fraction=0.2, **_TRAINING)
  assert task.train_data.client_ids == task.personal_test_data.client_ids == _eligible(plays)
  for role in _eligible(plays):
    training_part, test = _windows(plain.train_data, role), _windows(plain.personal_test_data, role)
    train, validation = _windows(task.train_data, role), _windows(task.personal_test_data, role)
    assert len(validation) == round(0.2 * len(training_part)) and len(train) + len(validation) == len(training_part)
    np.testing.assert_array_equal(np.sort(np.concatenate([train, validation]), axis=0), np.sort(training_part, axis=0))
    assert not _rows(validation) & _rows(train) and not _rows(validation) & _rows(test), role
  # The pooled evaluation reads the validation parts: as many examples as they hold, no test window.
  pooled = list(task.evaluate._dataset.unbatch().as_numpy_iterator())  # pylint: disable=protected-access
  assert len(pooled) == sum(len(_windows(task.personal_test_data, role)) for role in _eligible(plays))


def test_rfa_validation_split_is_fixed_by_split_seed(plays):
  split = lambda seed: [_windows(tasks.create_task('shakespeare_lstm_rfa', validation_fraction=0.2, split_seed=seed,
                                                   **_TRAINING).personal_test_data, role) for role in _eligible(plays)]
  first, again, other = split(0), split(0), split(1)
  assert all(np.array_equal(a, b) for a, b in zip(first, again))
  assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_delta_fl_validation_is_held_out_of_the_training_roles_and_no_test_role_is_read(plays):
  plain = shakespeare_papers.create_dfl_task(shakespeare_source='plays', **_TRAINING)
  task = tasks.create_task('shakespeare_gru_dfl', shakespeare_source='plays', validation_fraction=0.2, **_TRAINING)
  assert task.train_data.client_ids == plain.train_data.client_ids == _test_data(task).client_ids
  for role in task.train_data.client_ids:
    train, validation = _windows(task.train_data, role), _windows(_test_data(task), role)
    expected = _numpy_windows(plays[role])
    assert len(validation) == round(0.2 * len(expected)) and not _rows(train) & _rows(validation)
    np.testing.assert_array_equal(np.sort(np.concatenate([train, validation]), axis=0), np.sort(expected, axis=0))
  test_roles = _test_data(plain).client_ids
  assert not set(test_roles) & set(_test_data(task).client_ids)
  pooled = list(task.evaluate._dataset.unbatch().as_numpy_iterator())  # pylint: disable=protected-access
  assert len(pooled) == sum(len(_windows(_test_data(task), role)) for role in task.train_data.client_ids)


@pytest.mark.parametrize('name', ['shakespeare_lstm_rfa', 'shakespeare_gru_dfl'])
@pytest.mark.parametrize('fraction', [0.0, 1.0, -0.2, float('nan'), True])
def test_a_validation_fraction_outside_the_open_unit_interval_is_refused_by_name(name, fraction, plays):
  with pytest.raises(ValueError, match=r'validation_fraction must be a number in \(0, 1\)'):
    tasks.create_task(name, shakespeare_source='plays', validation_fraction=fraction, **_TRAINING)

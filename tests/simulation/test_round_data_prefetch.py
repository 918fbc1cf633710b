"""The next round's client data built on a background thread (`round_data_prefetch`): the same data, in order."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from tff_robust.simulation import client_pipelines
from tff_robust.simulation import corruption
from tff_robust.simulation import round_data_prefetch
from tff_robust.tasks import base
from tff_robust.tasks import paper_models
from tff_robust.tasks import shakespeare_papers
from tff_robust.tasks import shakespeare_windows


class _Recorder:
  """A build that records (round, cohort, thread name) and fails for round `failing_round`."""

  def __init__(self, failing_round=None):
    self.calls = []
    self.failing_round = failing_round

  def __call__(self, round_num, cohort):
    self.calls.append((round_num, tuple(cohort), threading.current_thread().name))
    if round_num == self.failing_round:
      raise RuntimeError(f'round {round_num}')
    return [f'{round_num}:{client}' for client in cohort]


def test_a_started_build_runs_in_the_background_and_get_returns_it():
  build = _Recorder()
  with round_data_prefetch.RoundDataPrefetcher(build) as prefetcher:
    assert prefetcher.get(1, ['a', 'b']) == ['1:a', '1:b']  # nothing started: built in the caller's thread
    prefetcher.start(2, ['c'])
    assert prefetcher.get(2, ['c']) == ['2:c']
  assert [call[:2] for call in build.calls] == [(1, ('a', 'b')), (2, ('c',))]
  assert build.calls[0][2] == threading.current_thread().name
  assert build.calls[1][2].startswith('round-data')


def test_a_build_for_another_round_or_cohort_is_not_returned():
  build = _Recorder()
  with round_data_prefetch.RoundDataPrefetcher(build) as prefetcher:
    prefetcher.start(2, ['c'])
    assert prefetcher.get(2, ['d']) == ['2:d']
    prefetcher.start(3, ['e'])
    assert prefetcher.get(4, ['e']) == ['4:e']
  assert [call[:2] for call in build.calls] == [(2, ('c',)), (2, ('d',)), (3, ('e',)), (4, ('e',))]


def test_a_failing_background_build_raises_only_in_the_get_of_its_round():
  build = _Recorder(failing_round=2)
  with round_data_prefetch.RoundDataPrefetcher(build) as prefetcher:
    prefetcher.start(2, ['a'])
    prefetcher.wait()  # the build has failed by now; nothing is raised until round 2 asks for its data
    with pytest.raises(RuntimeError, match='round 2'):
      prefetcher.get(2, ['a'])
    assert prefetcher.get(3, ['a']) == ['3:a']
  assert [call[:2] for call in build.calls] == [(2, ('a',)), (3, ('a',))]


def _windows_task() -> base.Task:
  rng = np.random.default_rng(5)
  letters = list('the quick brown fox JUMPS over a lazy dog,;')
  texts = {f'play:ROLE{i}': ''.join(rng.choice(letters, size=size)) for i, size in enumerate([60, 150, 900, 2400])}
  symbols = shakespeare_windows.Symbols.from_texts(texts)
  model_fn = paper_models.classifier_model_fn(lambda: None, paper_models.shakespeare_input_spec())
  return base.Task(
      'tiny_windows', model_fn,
      shakespeare_windows.WindowsClientData(symbols, {role: symbols.window_positions(role) for role in texts}),
      base.batching(epochs=2, batch_size=10, seed=0), shakespeare_papers.reverse_windows, evaluate=None,
  )


def _batches(datasets) -> list:
  return [[tf.nest.map_structure(lambda t: t.numpy(), batch) for batch in dataset] for dataset in datasets]


@pytest.mark.parametrize('in_memory', [True, False])
def test_data_built_on_the_background_thread_equals_the_foregrounds(in_memory):
  """The runner's data path (the windows' shuffles, the cap, data corruption) under the runner's global seed: its
  tf.data seeds must not depend on the thread that builds the datasets."""
  task = _windows_task()
  tf.random.set_seed(2)
  client_data_fn = corruption.make_client_data_fn(task, 'data', frozenset(['play:ROLE2']), in_memory=in_memory)
  cap = client_pipelines.max_examples(64, epochs=2, batch_size=10)
  cohort = list(task.train_data.client_ids)

  def build(round_num, cohort):
    return client_pipelines.cohort_client_data(task.train_data, client_data_fn, cohort, cap, 0, round_num)

  with round_data_prefetch.RoundDataPrefetcher(build) as prefetcher:
    prefetcher.start(3, cohort)
    background = _batches(prefetcher.get(3, cohort))
  foreground = _batches(build(3, cohort))
  assert len(background) == len(cohort) and all(background)
  for client_background, client_foreground in zip(background, foreground):
    assert len(client_background) == len(client_foreground)
    for batch, batch_ref in zip(client_background, client_foreground):
      tf.nest.map_structure(np.testing.assert_array_equal, batch, batch_ref)

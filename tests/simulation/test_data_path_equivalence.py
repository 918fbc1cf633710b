"""The runner's data path and client loop of issue 36 against the ones before it, on a tiny Shakespeare-like cohort.

Before: every client's dataset was its whole pipeline (windows -> task batching -> the runner's cap), pushed
through tf.data in TFF's worker, and TFF's client work looped with `dataset.reduce` (`DATASET_REDUCE`). Now: the
client's capped sample is picked from its in-memory windows (`base.InMemoryClient`, `client_pipelines.
capped_in_memory`) and the clients loop over an iterator (`client_loop.LOOP_IMPLEMENTATION`). Three rounds of
FedAvg and of RFA (its geometric median) from the same model on the same cohorts, with the cap and with data
corruption, must give the same model weights to float tolerance.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.processes import composition
from tff_robust.processes import rfa
from tff_robust.simulation import client_pipelines
from tff_robust.simulation import corruption
from tff_robust.tasks import base
from tff_robust.tasks import paper_models
from tff_robust.tasks import shakespeare_papers
from tff_robust.tasks import shakespeare_windows

_BATCH = 10
_ROUNDS = 3


def _small_recurrent_model() -> tf.keras.Model:
  inputs = tf.keras.Input(shape=(paper_models.SEQUENCE_LENGTH,), dtype=tf.int32)
  hidden = tf.keras.layers.GRU(8)(tf.keras.layers.Embedding(paper_models.SHAKESPEARE_SYMBOLS, 4)(inputs))
  return tf.keras.Model(inputs, tf.keras.layers.Dense(paper_models.SHAKESPEARE_SYMBOLS)(hidden))


@pytest.fixture(scope='module')
def task() -> base.Task:
  rng = np.random.default_rng(5)
  letters = list('the quick brown fox JUMPS over a lazy dog,;')
  texts = {f'play:ROLE{i}': ''.join(rng.choice(letters, size=size)) for i, size in enumerate([60, 150, 900, 2400])}
  symbols = shakespeare_windows.Symbols.from_texts(texts)
  return base.Task(
      'tiny_windows',
      paper_models.classifier_model_fn(_small_recurrent_model, paper_models.shakespeare_input_spec()),
      shakespeare_windows.WindowsClientData(symbols, {role: symbols.window_positions(role) for role in texts}),
      base.batching(epochs=1, batch_size=_BATCH, seed=0), shakespeare_papers.reverse_windows, evaluate=None,
  )


def _trained_weights(process, task, initial_weights, *, in_memory: bool) -> list:
  tf.random.set_seed(2)  # the runner's global seed: the pipelines' shuffle seeds depend on it
  state = process.set_model_weights(process.initialize(), initial_weights)
  client_data_fn = corruption.make_client_data_fn(task, 'data', frozenset(['play:ROLE2']), in_memory=in_memory)
  cap = client_pipelines.max_examples(64, epochs=1, batch_size=_BATCH)
  cohort = list(task.train_data.client_ids)
  for round_num in range(1, _ROUNDS + 1):
    data = client_pipelines.cohort_client_data(task.train_data, client_data_fn, cohort, cap, 0, round_num)
    state = process.next(state, data).state
  return process.get_model_weights(state).trainable


@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['fedavg', 'rfa'])
def test_new_data_path_and_loop_give_the_old_rounds_model(task, algorithm):
  optimizer = lambda: tff.learning.optimizers.build_sgdm(learning_rate=0.5)
  build = (composition.build_fed_avg_process if algorithm == 'fedavg'
           else lambda *args, **kwargs: rfa.build_rfa_process(*args, num_passes=3, **kwargs))
  old = build(task.model_fn, optimizer(), loop_implementation=tff.learning.LoopImplementation.DATASET_REDUCE)
  new = build(task.model_fn, optimizer())
  initial = new.get_model_weights(new.initialize())
  old_weights = _trained_weights(old, task, initial, in_memory=False)
  new_weights = _trained_weights(new, task, initial, in_memory=True)
  assert any(not np.allclose(a, b) for a, b in zip(new_weights, initial.trainable))  # the rounds trained
  for old_weight, new_weight in zip(old_weights, new_weights):
    np.testing.assert_allclose(new_weight, old_weight, rtol=1e-5, atol=1e-6)


def test_the_runners_processes_loop_over_iterators():
  """No `ReduceDataset` left in a FedAvg round's client graphs (the old loop instantiated its step per call)."""
  model_fn = paper_models.classifier_model_fn(_small_recurrent_model, paper_models.shakespeare_input_spec())
  process = composition.build_fed_avg_process(model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1))
  ops = set()
  pending = [process.next.get_proto(process.next)]
  while pending:
    proto = pending.pop()
    if proto.DESCRIPTOR.name == 'TensorFlow':
      graph = tf.compat.v1.GraphDef()
      proto.graph_def.Unpack(graph)
      ops |= {node.op for node in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
      continue
    for descriptor, value in proto.ListFields():
      if descriptor.message_type is None:
        continue
      pending.extend(value if descriptor.label == descriptor.LABEL_REPEATED else [value])
  assert 'IteratorGetNextAsOptional' in ops
  assert 'ReduceDataset' not in ops

"""EMNIST-62 as the RFA and Superquantile FL (Delta-FL) papers use it, from TFF's loader.

Data: `tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir=...)`, 62 classes, one device
per writer, derived from LEAF's preprocessing as both papers' data. Pixels stay as the loader gives them, in
[0, 1] with 1 the background (LEAF's convention), so RFA's data corruption 1 - x (notes `rfa.md` §3.5) is the
negative image. Elements are {'x': float32 [28, 28], 'y': int32}.

* `emnist_{linear,cnn}_rfa` (notes `rfa.md` §3.2-3.4): writers with fewer than 100 examples (TFF's train +
  test) are discarded and RFA's fixed sample of 1000 of the rest is kept. Train and test are split within
  each writer: TFF's own per-writer split (every writer in both; about 90% / 10%, as LEAF's sample split of
  RFA's 90% / 10%). Models: linear (48,608 parameters) or RFA's ConvNet with FC-2048 (6,603,710).
* `emnist_{linear,cnn}_dfl` (notes `superquantile_fl.md` §3.2-3.4): writers with fewer than 100 examples are
  discarded, a fixed random half of the rest is kept and split by writer into training and unseen test
  writers (LEAF: 1730 -> 865 / 865); a device's data is all its examples (TFF's train + test). Models: linear
  with (lambda/2)||w||^2 (lambda = `l2_regularization`, tuned in the paper; 0 by default) or Delta-FL's
  ConvNet without a hidden FC layer (115,646 parameters).

TFF's EMNIST has 3400 writers, not LEAF's 3550, so the counts after filtering differ from the papers' 3461
(RFA) and 1730 (Delta-FL). Not done: Delta-FL's code standardises pixels with precomputed per-pixel means
and deviations ([CODE] in the notes, §3.3); the paper does not mention it, and we keep the pixels in [0, 1].
`use_synthetic_data` writes a small random file of the loader's format (`tff_sql_files`) and loads it
through the same loader, with every eligible writer kept (RFA).
"""

import collections
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.tasks import data_corruption
from tff_robust.tasks import task_names
from tff_robust.tasks import base
from tff_robust.tasks import paper_models
from tff_robust.tasks import paper_splits
from tff_robust.tasks import tff_sql_files

RFA_NUM_DEVICES = 1000
DFL_KEEP_FRACTION = 0.5
_MODELS = {
    'rfa': {'linear': paper_models.emnist_linear, 'cnn': paper_models.emnist_cnn_rfa},
    'dfl': {'linear': paper_models.emnist_linear, 'cnn': paper_models.emnist_cnn_dfl},
}


def load_emnist(cache_dir: Optional[str]):
  """(train, test, {writer: train + test examples}) from TFF's loader (EMNIST-62) reading `cache_dir`."""
  try:
    train, test = tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir=cache_dir)
  except Exception as error:  # TFF raises whatever its downloader raises (URLError, OSError, ...).
    raise base.DataUnavailableError(
        f'Could not load EMNIST ({type(error).__name__}: {error}). Without network access, put '
        f'{tff_sql_files.EMNIST_FILENAME} in the cache directory or use synthetic data.'
    ) from error
  path = tff_sql_files.database_path(cache_dir, tff_sql_files.EMNIST_FILENAME)
  train_counts, test_counts = (tff_sql_files.example_counts(path, split) for split in tff_sql_files.EMNIST_SPLITS)
  totals = {w: train_counts.get(w, 0) + test_counts.get(w, 0) for w in set(train_counts) | set(test_counts)}
  return train, test, totals


def as_examples(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """The loader's {'label', 'pixels'} as the models' {'x': pixels, 'y': label}."""
  return dataset.map(lambda e: collections.OrderedDict(x=e['pixels'], y=e['label']))


def _model_fn(paper: str, model: str, l2_regularization: float):
  if model not in _MODELS[paper]:
    raise ValueError(f'model must be one of {sorted(_MODELS[paper])}, got {model!r}')
  if model == 'linear':
    build = lambda: paper_models.emnist_linear(l2_regularization)
  elif l2_regularization:
    raise ValueError('l2_regularization applies to the linear model only (notes superquantile_fl.md §3.4)')
  else:
    build = _MODELS[paper][model]
  return paper_models.classifier_model_fn(build, paper_models.emnist_input_spec())


def _cache_dir(cache_dir: Optional[str], use_synthetic_data: bool) -> Optional[str]:
  return tff_sql_files.synthetic_cache_dir('emnist') if use_synthetic_data else cache_dir


def create_rfa_task(
    model: str, *, client_epochs: int, client_batch_size: int, seed: int, cache_dir: Optional[str] = None,
    use_synthetic_data: bool = False, num_devices: Optional[int] = RFA_NUM_DEVICES, l2_regularization: float = 0.0,
) -> base.Task:
  """`emnist_<model>_rfa`: RFA's 1000 writers, each split within itself (`personal_test_data`)."""
  model_fn = _model_fn('rfa', model, l2_regularization)
  train, test, totals = load_emnist(_cache_dir(cache_dir, use_synthetic_data))
  writers = paper_splits.rfa_device_sample(
      paper_splits.devices_with_enough_examples(totals), None if use_synthetic_data else num_devices
  )
  return paper_splits.within_device_task(
      f'emnist_{model}_rfa', model_fn,
      paper_splits.subset(train.preprocess(as_examples), writers),
      paper_splits.subset(test.preprocess(as_examples), writers),
      data_corruption.negate_images('x'),
      client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed,
      flip_labels=data_corruption.flip_labels('y', paper_models.EMNIST_CLASSES),
  )


def create_dfl_task(
    model: str, *, client_epochs: int, client_batch_size: int, seed: int, cache_dir: Optional[str] = None,
    use_synthetic_data: bool = False, split_seed: int = 0, l2_regularization: float = 0.0,
    max_evaluated_devices: Optional[int] = None,
) -> base.Task:
  """`emnist_<model>_dfl`: Delta-FL's half of the writers, split by writer (`device_evaluator`)."""
  model_fn = _model_fn('dfl', model, l2_regularization)
  train, test, totals = load_emnist(_cache_dir(cache_dir, use_synthetic_data))
  all_examples = tff.simulation.datasets.ClientData.from_clients_and_tf_fn(
      sorted(totals), lambda writer: as_examples(
          train.serializable_dataset_fn(writer).concatenate(test.serializable_dataset_fn(writer))
      ),
  )
  train_writers, test_writers = paper_splits.dfl_device_split(
      paper_splits.devices_with_enough_examples(totals), keep_fraction=DFL_KEEP_FRACTION, seed=split_seed
  )
  return paper_splits.by_device_task(
      f'emnist_{model}_dfl', model_fn,
      paper_splits.subset(all_examples, train_writers), paper_splits.subset(all_examples, test_writers),
      data_corruption.negate_images('x'),
      client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed,
      max_evaluated_devices=max_evaluated_devices,
      flip_labels=data_corruption.flip_labels('y', paper_models.EMNIST_CLASSES),
  )


TASK_NAMES = task_names.EMNIST_PAPER_TASK_NAMES


def create_task(
    name: str, *, client_epochs: int, client_batch_size: int, seed: int, cache_dir: Optional[str] = None,
    use_synthetic_data: bool = False, **options,
) -> base.Task:
  """`emnist_<model>_<paper>`: `create_rfa_task` or `create_dfl_task` with `options`, their keyword arguments
  (none: the papers' defaults, no l2 regularisation and every device evaluated)."""
  if name not in TASK_NAMES:
    raise ValueError(f'name must be one of {TASK_NAMES}, got {name!r}')
  _, model, paper = name.split('_')
  create = create_rfa_task if paper == 'rfa' else create_dfl_task
  return create(
      model, client_epochs=client_epochs, client_batch_size=client_batch_size, seed=seed, cache_dir=cache_dir,
      use_synthetic_data=use_synthetic_data, **options,
  )

"""The Fed+ paper's synthetic regression with one outlier party (Kundu et al., Sec. 5.1, Table 2).

Party k = 1..N holds `samples_per_party` examples x ~ N(mu_k, Sigma), y = w_k^T x + v, with
  * Sigma diagonal, Sigma_jj = (((j - 1) mod 50) + 1)^(-1.1) for 1-based j (the paper's `mod(j, 50)^(-1.1)`
    would divide by zero at j = 50, 100, ...), i.e. the values 1^(-1.1) .. 50^(-1.1) repeated;
  * mu_k ~ N(0, 0.5 I) (variance 0.5 per coordinate), one draw per party;
  * v ~ N(0, 2) (variance 2);
  * w_k = wbar + Laplace(0, 0.5) elementwise for k = 1..N-1, with one shared wbar ~ N(0, 5 I);
  * the outlier party N: w_N = wbar' + Laplace(0, 0.5), with its own wbar' ~ N(0, 50 I).
Each party's examples are split at random, half for training and half for its own test set (the paper's
50% / 50%). The paper's "error" is taken to be the test MSE on raw y. Defaults are the paper's: N = 10,
d = 1000, 100 samples per party, so each party trains on 50 examples (batch 10 and 4 epochs are the
paper's E_k = 20 local iterations).
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_robust.aggregators import type_checks
from tff_robust.tasks import data_corruption
from tff_robust.tasks import base
from tff_robust.tasks import evaluation

NUM_PARTIES = 10
DIMENSION = 1000
SAMPLES_PER_PARTY = 100
COVARIANCE_PERIOD = 50
COVARIANCE_EXPONENT = 1.1
MEAN_VARIANCE = 0.5
NOISE_VARIANCE = 2.0
SHARED_WEIGHT_VARIANCE = 5.0
OUTLIER_WEIGHT_VARIANCE = 50.0
LAPLACE_SCALE = 0.5


def covariance_diagonal(dimension: int) -> np.ndarray:
  """Sigma_jj = (((j - 1) mod 50) + 1)^(-1.1) for j = 1..dimension (float64)."""
  return ((np.arange(dimension) % COVARIANCE_PERIOD) + 1.0) ** -COVARIANCE_EXPONENT


def make_party_arrays(
    *, num_parties: int = NUM_PARTIES, dimension: int = DIMENSION, samples_per_party: int = SAMPLES_PER_PARTY,
    split_seed: int = 0
):
  """Draws the parties' data (Fed+ Sec. 5.1) from `np.random.default_rng(split_seed)`.

  Args:
    num_parties: N >= 2; the last party (highest client id) is the outlier.
    dimension: d >= 1.
    samples_per_party: examples per party >= 2; floor(n / 2) train, the rest test.
    split_seed: seed of every draw (weights, means, inputs, noise and the train/test split).

  Returns:
    ({client_id: (x_train, y_train)}, {client_id: (x_test, y_test)}, true weights of shape (N, d)), with
    float32 x of shape (n, d) and y of shape (n, 1); client ids 'client_000' .. in party order.

  Raises:
    ValueError: if an argument is out of range.
  """
  type_checks.check_integer('num_parties', num_parties, minimum=2)
  type_checks.check_integer('dimension', dimension, minimum=1)
  type_checks.check_integer('samples_per_party', samples_per_party, minimum=2)
  rng = np.random.default_rng(split_seed)
  shared = rng.normal(0.0, np.sqrt(SHARED_WEIGHT_VARIANCE), dimension)
  outlier = rng.normal(0.0, np.sqrt(OUTLIER_WEIGHT_VARIANCE), dimension)
  centres = np.stack([shared] * (num_parties - 1) + [outlier])
  weights = centres + rng.laplace(0.0, LAPLACE_SCALE, (num_parties, dimension))
  std = np.sqrt(covariance_diagonal(dimension))
  num_train = samples_per_party // 2
  train, test = {}, {}
  for k in range(num_parties):
    mean = rng.normal(0.0, np.sqrt(MEAN_VARIANCE), dimension)
    x = mean + std * rng.standard_normal((samples_per_party, dimension))
    y = x @ weights[k] + rng.normal(0.0, np.sqrt(NOISE_VARIANCE), samples_per_party)
    order = rng.permutation(samples_per_party)
    x, y = x[order].astype(np.float32), y[order, None].astype(np.float32)
    client_id = f'client_{k:03d}'
    train[client_id] = (x[:num_train], y[:num_train])
    test[client_id] = (x[num_train:], y[num_train:])
  return train, test, weights


def make_model_fn(dimension: int = DIMENSION):
  """A no-arg `model_fn`: linear regression d -> 1 without bias, zero-initialised, MSE loss, 'mse' metric."""
  type_checks.check_integer('dimension', dimension, minimum=1)

  def model_fn() -> tff.learning.models.VariableModel:
    inputs = tf.keras.Input(shape=(dimension,))
    outputs = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer='zeros')(inputs)
    return tff.learning.models.from_keras_model(
        tf.keras.Model(inputs, outputs),
        loss=tf.keras.losses.MeanSquaredError(),
        input_spec=collections.OrderedDict(
            x=tf.TensorSpec([None, dimension], tf.float32), y=tf.TensorSpec([None, 1], tf.float32)
        ),
        metrics=[tf.keras.metrics.MeanSquaredError(name='mse')],
    )

  return model_fn


def create_task(
    *, client_epochs: int, client_batch_size: int, seed: int, num_parties: int = NUM_PARTIES, split_seed: int = 0
) -> base.Task:
  """The paper's setting (N = `num_parties` >= 2, 10 in Table 2; d = 1000). `evaluate` reports loss and mse on
  the pooled test halves; `personal_test_data` holds each party's own test half."""
  train, test, _ = make_party_arrays(num_parties=num_parties, split_seed=split_seed)
  model_fn = make_model_fn(DIMENSION)
  x_test = np.concatenate([x for x, _ in test.values()])
  y_test = np.concatenate([y for _, y in test.values()])
  return base.Task(
      'synthetic_regression_fedplus', model_fn, base.client_data_from_arrays(train),
      preprocess_train=base.batching(epochs=client_epochs, batch_size=client_batch_size, seed=seed),
      corrupt_train=data_corruption.negate_targets('y'),
      evaluate=evaluation.CentralizedEvaluator(model_fn, base.test_dataset_from_arrays(x_test, y_test), {}),
      personal_test_data=base.client_data_from_arrays(test),
  )

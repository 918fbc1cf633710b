"""NumPy oracles of the simulation tasks' classifiers: their logits and the metrics Keras reports on them."""

import numpy as np


def mlp_logits(weights, x):
  """Logits of digits' MLP, relu(x W1 + b1) W2 + b2, in float64."""
  kernel1, bias1, kernel2, bias2 = (np.asarray(w, np.float64) for w in weights)
  return np.maximum(x @ kernel1 + bias1, 0.0) @ kernel2 + bias2


def logistic_logits(weights, x):
  """Logits of a multinomial logistic regression, x W + b, in float64."""
  kernel, bias = (np.asarray(w, np.float64) for w in weights)
  return x @ kernel + bias


def mean_cross_entropy(logits, y):
  """Mean over examples of -log softmax(logits)[y], computed stably (max-shifted log-sum-exp)."""
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  return float(-log_probs[np.arange(len(y)), y].mean())


def error_rate(logits, y):
  """Share of examples whose arg-max logit is not the label."""
  return float(np.mean(logits.argmax(axis=1) != y))

"""tff_robust: robust and personalized federated learning as TensorFlow Federated objects."""

__version__ = '0.1.0'

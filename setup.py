"""Installs tff_robust, robust and personalized federated learning for TensorFlow Federated.

Install the exact, tested dependency set with `bash scripts/setup.sh` (see README): TFF 0.87.0 pins a
jaxlib that some package indexes do not serve, so the lock file overrides it.

Only the `tff_robust` package is installed: the binaries under `experiments/` and `benchmarks/` run from the
checkout (`python -m experiments.train`), so no top-level module of those names shadows a user's own.
"""
import setuptools

setuptools.setup(
    name='tff_robust',
    version='0.1.0',
    description=(
        'Robust aggregation (RFA), superquantile federated learning, Fed+ and MtFEEL '
        'as TensorFlow Federated aggregators and learning processes.'
    ),
    packages=setuptools.find_packages(include=['tff_robust', 'tff_robust.*']),
    python_requires='>=3.9,<3.12',
    install_requires=[
        'tensorflow-federated==0.87.0',
        'tensorflow==2.14.1',
        'tensorflow-datasets==4.9.3',
        'numpy==1.25.2',
        'absl-py==1.4.0',
        'scikit-learn==1.7.2',
        'matplotlib==3.11.2',
        'tqdm==4.70.1',
    ],
    license='Apache-2.0',
)

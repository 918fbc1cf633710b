"""The repository's root directory, for the tests that read its files or run its commands from it."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

"""Warnings that say nothing about a chapter, silenced before anything imports their source.

tqdm.auto, imported by Lightning, datasets and transformers inside a kernel, warns that the
Jupyter widgets are missing and falls back to text progress bars; the warning landed on every
page that trains a model.
"""

import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

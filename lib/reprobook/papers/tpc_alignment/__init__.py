"""Chapter 04: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language
Learning" (arXiv 2607.03143).

Modules: ``data`` (the shapes-and-captions generator, vocabulary, prompts, hard negatives and the
semantic relevance of each caption), ``loss`` (the TPC objective: consensus core, disagreement,
core filter, unsaid residual, per-instance temperature, symmetric InfoNCE), ``model`` (the dual
encoder as a LightningModule), ``train`` (pretraining and the fine-tuning arms, cached between
notebooks), ``theory`` (Theorem 5.1, Lemma A.1, Theorem 5.2), ``diagnostics`` (dispersion,
leakage, rank volatility, retrieval, calibration, risk-coverage), ``attacks`` (PGD for
adversarial fine-tuning; PGD and APGD evaluation through the Adversarial Robustness Toolbox),
``worlds`` (the sweep of the wrong-detail rate) and
``config`` (the notebooks' profiles).
"""

from reprobook import core

from . import config  # the rest loads on first use (the package's __getattr__)

__getattr__ = core.lazy_submodules(__name__)

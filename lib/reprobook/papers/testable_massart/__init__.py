"""Chapter 05: "Testable Learning of General Halfspaces under Massart Noise" (arXiv 2602.22300).

Only the abstract was available: the tester and learner are our reconstruction of the standard
testable-learning template (Hermite moment matching plus sandwiching polynomials, then L1
polynomial regression). Modules: ``hermite`` (orthonormal multivariate Hermite features and
Gauss-Hermite product rules), ``sandwich`` (the sandwiching-polynomial linear program for
sign(z - t)), ``tester`` (the moment-matching tester, calibrated under the Gaussian null),
``data`` (Gaussian and non-Gaussian marginals, halfspaces, Massart noise), ``learners`` (L1
polynomial regression, the Chow-vector halfspace, the constant hypothesis, the tester-learner)
and ``config`` (the notebooks' profiles).
"""

from reprobook.core import lazy_submodules

from . import config, data, hermite, learners, sandwich, tester

__getattr__ = lazy_submodules(__name__)

"""Chapter 16's numerical solvers under rounding: the stationary distribution's linear solve and
the safeguarded Newton behind the cosine quantiles and the flow map must land where they do
without a rounding-level move of their inputs (``core.jitter(x, seed, rel=1e-12)``).

Training and sampling are torch loops, whose values move with the kernels (accepted); these
are the routines outside them that solve for an answer.
"""

import copy

import numpy as np
import pytest

from reprobook import core
from reprobook.papers.vmf_sphere_flow import data, geometry

SEEDS = range(6)


def test_stationary_distribution_is_stable_under_jitter():
    # mu (P^T - I) = 0 is singular as it stands; the solve replaces one equation by sum mu = 1.
    # Catches a solve of the singular system (noise, or an error on another machine) and any
    # loss of that normalisation.
    chain = data.MarkovChain(V=12, seed=0)
    ref = chain.stationary()
    np.testing.assert_allclose(ref @ chain.trans, ref, atol=1e-13)
    for s in SEEDS:
        moved = copy.copy(chain)
        moved.trans = core.jitter(chain.trans, s)
        np.testing.assert_allclose(moved.stationary(), ref, atol=1e-11)


@pytest.mark.parametrize("d", [3, 16, 64])
@pytest.mark.parametrize("kappa", [0.5, 10.0, 200.0])
def test_cosine_quantiles_and_flow_map_are_stable_under_jitter(d, kappa):
    # The quantile function is a root of log F (or log(1 - F)) = log u found by Newton inside a
    # bracket, then the flow map composes it with F. Catches a solver whose stopping point
    # depends on the last bits (an unbracketed Newton step, a tolerance it cannot reach): the
    # roots would then differ by far more than 1e-9.
    u = np.linspace(0.001, 0.999, 199)
    s_ref = geometry.cosine_icdf(u, d, kappa)
    f_ref = geometry.flow_map_cosine(s_ref, kappa, 2 * kappa, d)
    for s in range(3):
        got = geometry.cosine_icdf(core.jitter(u, s), d, float(core.jitter(np.array(kappa), s + 9)))
        np.testing.assert_allclose(got, s_ref, atol=1e-9)
        flow = geometry.flow_map_cosine(core.jitter(s_ref, s), kappa, 2 * kappa, d)
        np.testing.assert_allclose(flow, f_ref, atol=1e-9)

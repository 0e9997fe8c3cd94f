"""core.numerics: rounding-level jitter and the count of failed replicates."""

from __future__ import annotations

import numpy as np
import pytest

from reprobook.core import Failures, InputError, jitter


def test_jitter_moves_each_entry_by_at_most_rel_and_is_seeded():
    x = np.array([[1.0, -2.5, 0.0], [3e5, 1e-9, -7.0]])
    a, b, c = jitter(x, 0), jitter(x, 0), jitter(x, 1)
    np.testing.assert_array_equal(a, b)  # the same seed, the same values
    assert not np.array_equal(a, c)
    rel = np.abs(a - x)[x != 0] / np.abs(x[x != 0])
    assert rel.max() <= 1e-12 and rel.min() > 0  # every non-zero entry moved, within rel
    assert a[0, 2] == 0.0  # zero stays zero
    assert x[0, 0] == 1.0  # the input is not changed in place
    big = jitter(x, 0, rel=1e-8)
    np.testing.assert_allclose(big - x, (a - x) * 1e4, rtol=1e-3, atol=1e-30)  # one draw


def test_jitter_refuses_counts_and_silly_sizes():
    with pytest.raises(InputError, match="floating-point array"):
        jitter(np.arange(4), 0)
    with pytest.raises(InputError, match="floating-point array"):
        jitter(np.ones(3, dtype=bool), 0)
    with pytest.raises(InputError, match="rel"):
        jitter(np.ones(3), 0, rel=1e-3)


def test_failures_count_and_note():
    f = Failures("surveys")
    assert f.count == 0 and f.note(10) == ""
    f.add(3, ValueError("no mode"))
    f.add(7, "singular")
    assert f.count == 2 and f.units == [3, 7]
    assert f.note(40) == "2 of 40 surveys failed and are left out (first: 3: no mode)"
    with pytest.raises(InputError, match="total"):
        f.note(1)  # fewer cases than failures
    f.add(3, "again")  # the same case failing twice is two failures
    assert f.count == 3 and f.units == [3, 7, 3]
    assert f.reasons == {3: "no mode", 7: "singular", "3 #2": "again"}


def test_linprog_chain_tries_each_method_until_one_is_accepted():
    from scipy.optimize import OptimizeResult, linprog

    from reprobook.core import linprog_chain

    calls = []

    def flaky(c, method, options, **lp):  # the first method fails, as on an unlucky machine
        calls.append((method, dict(options)))
        if method == "highs-ds":
            return OptimizeResult(status=4, x=None, message="numerical difficulties")
        return linprog(c, method=method, options=options, **lp)

    # min x + y s.t. x + 2y >= 2, x, y >= 0: optimum 1 at (0, 1)
    lp = dict(A_ub=[[-1.0, -2.0]], b_ub=[-2.0], bounds=(0, None))
    methods = ["highs-ds", ("highs-ipm", {"presolve": False})]
    res, tried = linprog_chain([1.0, 1.0], methods, options={"disp": False}, solve=flaky, **lp)
    assert res.status == 0 and res.fun == pytest.approx(1.0)
    assert [label for label, _ in tried] == ["highs-ds"] and tried[0][1].status == 4
    assert calls == [
        ("highs-ds", {"disp": False}),
        ("highs-ipm", {"disp": False, "presolve": False}),
    ]
    res, tried = linprog_chain([1.0, 1.0], ["highs-ds"], solve=flaky, **lp)
    assert res.status == 4 and len(tried) == 1  # none accepted: the caller sees the status
    infeasible = dict(A_ub=[[1.0, 1.0]], b_ub=[-1.0], bounds=(0, None))
    res, tried = linprog_chain([1.0, 1.0], ["highs", "highs-ipm"], accept=(0, 2), **infeasible)
    assert res.status == 2 and tried == []  # infeasibility accepted at the first method
    with pytest.raises(InputError, match="methods is empty"):
        linprog_chain([1.0], [], **lp)

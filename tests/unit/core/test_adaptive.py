"""Adaptive integration along the path (explain.core.adaptive) on integrands with known integrals.

The module reaches the model only through two callables; here they evaluate a known f and its
derivative h = f', so every answer is checked against the exact integral f(1) - f(0).
"""

import numpy as np
import pytest
from scipy.special import erf

from explain.core import adaptive
from explain.core.quadrature import METHODS, alphas_and_weights


def smooth():
    return (lambda a: np.sin(3 * a) + a ** 2), (lambda a: 3 * np.cos(3 * a) + 2 * a)


def step(center=0.4253, width=2e-4, height=0.35):
    """A smoothed step of f: h is a bump of width ~``width`` (f jumps by ``height`` there)."""
    def h(a):
        u = np.clip((a - center) / width, -300, 300)
        return height * 0.5 / width / np.cosh(u) ** 2 + 0.1
    return (lambda a: height * 0.5 * (1 + np.tanh((a - center) / width)) + 0.1 * a), h


def spike(center=0.7, width=1e-3, height=0.5):
    """A narrow Gaussian spike of h on a smooth background: f = erf step + sin."""
    return ((lambda a: height * 0.5 * (1 + erf((a - center) / width)) + 0.2 * np.sin(a)),
            (lambda a: height / (width * np.sqrt(np.pi)) * np.exp(-((a - center) / width) ** 2) + 0.2 * np.cos(a)))


def several_steps(seed, count=6):
    """Steps at random places, of random widths and signs: f goes up and down along the path."""
    rng = np.random.default_rng(seed)
    centers, widths = rng.uniform(0.05, 0.95, count), 10 ** rng.uniform(-3.5, -2.5, count)
    heights = rng.normal(0, 0.2, count)
    parts = [step(c, w, h) for c, w, h in zip(centers, widths, heights)]
    return ((lambda a: sum(f(a) for f, _ in parts) - 0.1 * count * a),
            (lambda a: sum(h(a) for _, h in parts) - 0.1 * count))


class Known:
    """The two callables of ``adaptive.integrate`` for rows with known f and h; counts the calls."""

    def __init__(self, functions):
        self.functions = functions
        self.calls = {"forward": 0, "gradients": 0}

    def forward(self, rows, alphas):
        self.calls["forward"] += 1
        return np.array([self.functions[r][0](a) for r, a in zip(rows, alphas)], np.float64)

    def gradients(self, rows, alphas, weights):
        self.calls["gradients"] += 1
        sums = np.array([np.dot(w, self.functions[r][1](a)) for r, a, w in zip(rows, alphas, weights)])
        return sums[:, None], sums  # one "input" whose direction x - b is 1

    def run(self, limit, **kwargs):
        f0 = np.array([f(0.0) for f, _ in self.functions])
        f1 = np.array([f(1.0) for f, _ in self.functions])
        return adaptive.integrate(self.forward, self.gradients, f0, f1, limit, **kwargs), f1 - f0


def uniform_error(functions, points, method="gausslegendre"):
    a, w = alphas_and_weights(method, points)
    return np.array([f(1.0) - f(0.0) - np.dot(w, h(a)) for f, h in functions])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("points", [2, 3, 4, 7])
def test_panel_weights_sum_to_the_panel_width(method, points):
    if method == "trapezoid" and points < 2:
        pytest.skip("the trapezoid needs 2 points")
    edges = np.array([0.0, 0.125, 0.4253, 0.42531, 0.9, 1.0])
    lo, hi = edges[:-1], edges[1:]
    alphas, weights = adaptive.panel_rule(method, lo, hi, points)
    np.testing.assert_allclose(weights.sum(axis=1), hi - lo, rtol=1e-14)
    assert np.all((alphas >= lo[:, None]) & (alphas <= hi[:, None]))
    # the panels together cover [0, 1]: a constant integrates exactly (a linear model is exact)
    assert abs(weights.sum() - 1.0) < 1e-14


@pytest.mark.parametrize("degree", range(8))
def test_gauss_legendre_panels_are_exact_for_polynomials_up_to_degree_7(degree):
    edges = np.array([0.0, 0.05, 0.3, 0.31, 0.7, 1.0])
    alphas, weights = adaptive.panel_rule("gausslegendre", edges[:-1], edges[1:], 4)
    assert np.sum(weights * alphas ** degree) == pytest.approx(1 / (degree + 1), abs=1e-14)


@pytest.mark.parametrize("name, functions, most_points", [
    ("smooth", smooth(), 16),
    ("step", step(), 256),
    ("spike", spike(), 256),
])
def test_known_integrals_meet_the_tolerance_with_few_points(name, functions, most_points):
    known = Known([functions])
    result, exact = known.run(limit=1e-4 * np.ones(1))
    assert abs(exact[0] - result.estimate[0]) <= 1e-4, (name, result)
    assert result.gradient_points[0] <= most_points
    np.testing.assert_allclose(result.sums[:, 0], result.estimate)
    assert result.final_points[0] <= result.gradient_points[0]
    if name != "smooth":  # the uniform rule with as many points misses by far more
        assert abs(uniform_error([functions], int(result.gradient_points[0]))[0]) > 100 * 1e-4


def test_smooth_rows_stop_after_the_first_try_as_a_fixed_rule():
    known = Known([smooth(), (lambda a: 2 * a + 1, lambda a: 2 + 0 * a)])  # the second: a linear model
    result, exact = known.run(limit=np.full(2, 1e-6))
    np.testing.assert_array_equal(result.gradient_points, [16, 16])
    np.testing.assert_array_equal(result.forward_points, [2, 2])  # f(0) and f(1) only: no sweep
    assert known.calls == {"forward": 0, "gradients": 1}
    a, w = alphas_and_weights("gausslegendre", 16)
    assert result.estimate[1] == pytest.approx(2.0, abs=1e-14)
    assert result.estimate[0] == np.dot(w, smooth()[1](a))  # exactly the 16-point rule


def test_several_steps_per_row_every_row_meets_its_limit_within_the_budget():
    functions = [several_steps(seed) for seed in range(12)]
    limit = np.maximum(0.005 * np.abs([f(1.0) - f(0.0) for f, _ in functions]), 1e-3)
    result, exact = Known(functions).run(limit=limit)
    assert np.all(np.abs(exact - result.estimate) <= limit)
    assert np.all(result.gradient_points <= adaptive.DEFAULT_MAX_POINTS)
    # the uniform rule with the largest number of points any row used still misses most rows
    missed = np.abs(uniform_error(functions, int(result.gradient_points.max()))) > limit
    assert missed.mean() > 0.5


def test_a_row_never_depends_on_the_other_rows():
    functions = [step(), smooth(), spike(), several_steps(3)]
    limit = np.full(4, 1e-4)
    together, _ = Known(functions).run(limit=limit)
    for i, functions_i in enumerate(functions):
        alone, _ = Known([functions_i]).run(limit=limit[i:i + 1])
        assert alone.estimate[0] == together.estimate[i]
        assert alone.gradient_points[0] == together.gradient_points[i]
        assert alone.forward_points[0] == together.forward_points[i]
        np.testing.assert_array_equal(alone.edges[0], together.edges[i])


def test_batched_calls_serve_many_rows():
    functions = [step(c) for c in np.linspace(0.2, 0.8, 10)]
    known = Known(functions)
    known.run(limit=np.full(10, 1e-4))
    rounds = known.calls["gradients"]
    single = Known(functions[:1])
    single.run(limit=np.full(1, 1e-4))
    assert rounds <= 2 * single.calls["gradients"]  # not one call per row


@pytest.mark.parametrize("max_points", [16, 48, 100])
def test_the_budget_is_kept_and_an_unconverged_row_says_so(max_points):
    known = Known([spike(width=1e-4)])
    result, exact = known.run(limit=np.full(1, 1e-9), max_points=max_points)
    assert result.gradient_points[0] <= max_points
    assert abs(exact[0] - result.estimate[0]) > 1e-9  # not converged: the delta shows it
    assert result.forward_points[0] <= 2 + max_points


def test_panels_are_placed_where_f_changes():
    f, _ = step(center=0.6, width=1e-3)
    grid = np.linspace(0, 1, 33)
    grid = np.union1d(grid, np.linspace(0.59, 0.61, 21))  # a located jump
    edges = grid[adaptive.place_panels(grid, f(grid), 8)]
    assert edges[0] == 0.0 and edges[-1] == 1.0
    inside = edges[(edges > 0.58) & (edges < 0.62)]
    assert len(inside) >= 2  # the jump gets its own narrow panels
    assert np.max(np.diff(edges)) <= 0.5  # the flat parts still have panels (the monitor mixes in the length)


@pytest.mark.parametrize("method", ["gausslegendre", "trapezoid", "middle"])
def test_every_rule_can_be_used_in_the_panels(method):
    result, exact = Known([step(width=1e-3)]).run(limit=np.full(1, 1e-3), method=method)
    assert abs(exact[0] - result.estimate[0]) <= 1e-3


@pytest.mark.parametrize("method", ["gausslegendre", "trapezoid"])
def test_the_final_rule_is_returned_on_request_and_changes_no_number(method):
    functions = [smooth(), step(width=1e-3), spike(), several_steps(4)]
    plain, exact = Known(functions).run(limit=np.full(4, 1e-4), method=method)
    kept, _ = Known(functions).run(limit=np.full(4, 1e-4), method=method, keep_rule=True)
    assert plain.rules is None and len(kept.rules) == 4
    np.testing.assert_array_equal(kept.sums, plain.sums)
    np.testing.assert_array_equal(kept.estimate, plain.estimate)
    np.testing.assert_array_equal(kept.gradient_points, plain.gradient_points)
    np.testing.assert_array_equal(kept.forward_points, plain.forward_points)
    for (f, h), (alphas, weights), edges, points, estimate in zip(functions, kept.rules, kept.edges,
                                                                  kept.final_points, kept.estimate):
        assert len(alphas) == len(weights) == points and np.all(np.diff(alphas) >= 0)
        assert weights.sum() == pytest.approx(1.0, abs=1e-12) and np.all((alphas >= 0) & (alphas <= 1))
        assert np.dot(weights, h(alphas)) == pytest.approx(estimate, rel=1e-12, abs=1e-12)  # the rule summed
        inside = np.searchsorted(edges, alphas, side="right") - 1
        for panel, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):  # each panel's weights: its width
            mine = (np.clip(inside, 0, len(edges) - 2) == panel)
            if method == "gausslegendre":
                assert weights[mine].sum() == pytest.approx(hi - lo, rel=1e-9)
    assert kept.final_points[1] > adaptive.START_POINTS and len(kept.edges[1]) > 2  # the step: in panels
    if method == "gausslegendre":
        assert kept.final_points[0] == adaptive.START_POINTS  # the smooth row: the first try

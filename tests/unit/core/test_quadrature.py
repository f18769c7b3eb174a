import numpy as np
import pytest

from explain.core.errors import AttributionError
from explain.core.quadrature import METHODS, STEPS_OUT_OF_RANGE, UNKNOWN_METHOD, alphas_and_weights

EXACT = {
    ("trapezoid", 2): ([0, 1], [1 / 2, 1 / 2]),
    ("trapezoid", 3): ([0, 1 / 2, 1], [1 / 4, 1 / 2, 1 / 4]),
    ("trapezoid", 4): ([0, 1 / 3, 2 / 3, 1], [1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    ("left", 2): ([0, 1 / 2], [1 / 2, 1 / 2]),
    ("left", 3): ([0, 1 / 3, 2 / 3], [1 / 3] * 3),
    ("left", 4): ([0, 1 / 4, 1 / 2, 3 / 4], [1 / 4] * 4),
    ("right", 2): ([1 / 2, 1], [1 / 2, 1 / 2]),
    ("right", 3): ([1 / 3, 2 / 3, 1], [1 / 3] * 3),
    ("right", 4): ([1 / 4, 1 / 2, 3 / 4, 1], [1 / 4] * 4),
    ("middle", 2): ([1 / 4, 3 / 4], [1 / 2, 1 / 2]),
    ("middle", 3): ([1 / 6, 1 / 2, 5 / 6], [1 / 3] * 3),
    ("middle", 4): ([1 / 8, 3 / 8, 5 / 8, 7 / 8], [1 / 4] * 4),
    ("gausslegendre", 2): ([0.5 - np.sqrt(3) / 6, 0.5 + np.sqrt(3) / 6], [1 / 2, 1 / 2]),
    ("gausslegendre", 3): ([0.5 - np.sqrt(15) / 10, 0.5, 0.5 + np.sqrt(15) / 10], [5 / 18, 8 / 18, 5 / 18]),
    ("gausslegendre", 4): (
        [0.5 - np.sqrt(3 / 7 + 2 / 7 * np.sqrt(6 / 5)) / 2, 0.5 - np.sqrt(3 / 7 - 2 / 7 * np.sqrt(6 / 5)) / 2,
         0.5 + np.sqrt(3 / 7 - 2 / 7 * np.sqrt(6 / 5)) / 2, 0.5 + np.sqrt(3 / 7 + 2 / 7 * np.sqrt(6 / 5)) / 2],
        [(18 - np.sqrt(30)) / 72, (18 + np.sqrt(30)) / 72, (18 + np.sqrt(30)) / 72, (18 - np.sqrt(30)) / 72],
    ),
}


@pytest.mark.parametrize("method, steps", sorted(EXACT))
def test_exact_alphas_and_weights(method, steps):
    alphas, weights = alphas_and_weights(method, steps)
    np.testing.assert_allclose(alphas, EXACT[method, steps][0], atol=1e-15)
    np.testing.assert_allclose(weights, EXACT[method, steps][1], atol=1e-15)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("steps", [2, 3, 7, 64, 1000])
def test_weights_sum_to_one(method, steps):
    alphas, weights = alphas_and_weights(method, steps)
    assert alphas.shape == weights.shape == (steps,)
    assert abs(weights.sum() - 1.0) < 1e-12
    assert np.all((alphas >= 0) & (alphas <= 1))


def test_trapezoid_is_not_captums():
    # Captum/alibi: n points with step 1/n -> weights sum to (n - 1) / n. Ours sum to 1.
    _, weights = alphas_and_weights("trapezoid", 10)
    assert weights.sum() == pytest.approx(1.0, abs=1e-15)
    assert weights[1] == pytest.approx(1 / 9)


@pytest.mark.parametrize("degree", range(0, 8))
def test_gauss_legendre_exact_for_polynomials(degree):
    alphas, weights = alphas_and_weights("gausslegendre", 4)  # exact up to degree 7
    assert np.dot(weights, alphas ** degree) == pytest.approx(1 / (degree + 1), abs=1e-14)


@pytest.mark.parametrize("method, steps, message", [
    ("simpson", 8, UNKNOWN_METHOD.split("{")[0]),
    ("trapezoid", 1, "out of range for method 'trapezoid'"),
    ("left", 0, "out of range"),
    ("left", 5000, "from 1 to 4096"),
    ("middle", 2.5, "out of range"),
    ("middle", True, "out of range"),
])
def test_bad_settings(method, steps, message):
    with pytest.raises(AttributionError, match=message):
        alphas_and_weights(method, steps)
    assert STEPS_OUT_OF_RANGE  # template importable

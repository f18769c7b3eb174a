"""Refactoring leaves the numbers alone (issue 39): the demo's attributions under five settings and the
padded bundle's under two, as recorded in tests/support/unchanged.npz before the engine was split.
Bit for bit on the processor (model and instruction-set flags) and library versions that recorded them;
elsewhere close (another CPU's vector width may change the order of a float32 sum, and so the panels that
steps="auto" adds: the steps and the tiny deltas are compared on the recording machine only)."""

import numpy as np
import pytest

from tests.support import unchanged


@pytest.fixture(scope="module")
def recorded():
    with np.load(unchanged.FILE) as saved:
        return {k: saved[k] for k in saved.files}


@pytest.fixture(scope="module")
def today():
    return unchanged.compute()


def test_every_recorded_array_is_computed_again_the_same(recorded, today):
    same_machine = str(recorded.pop("machine")) == unchanged.machine()
    assert set(today) == set(recorded)
    for name, before in recorded.items():
        now = today[name]
        assert now.shape == before.shape and now.dtype == before.dtype, name
        if same_machine:
            assert np.array_equal(now, before), f"{name}: max change {np.max(np.abs(now - before))}"
        elif not name.endswith(("/steps", "/delta")):  # another CPU's rounding may move steps="auto" by a panel
            np.testing.assert_allclose(now, before, rtol=1e-4, atol=1e-6, err_msg=name)

#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian machine, then run every test.
# Used by .ci/run and quoted in the README. Needs root (or sudo) for Debian's chromium.
#   bash scripts/test.sh [pytest options]           everything (what CI runs), in $TEST_WORKERS pytest-xdist
#                                                   workers (default 3), a test file's tests on one worker
#   bash scripts/test.sh --quick [pytest options]   the quick loop: the engine, bundles, analysis and AppTest
#                                                   pages in two workers; no browser, Ray, JAX subprocess or
#                                                   test measured over 1 s (tests/slow_tests.txt); no docs build
set -euo pipefail
cd "$(dirname "$0")/.."

# Python's bytecode kept in __pycache__ (ignored by git) for the run's many Python processes: where the machine sets
# PYTHONDONTWRITEBYTECODE (this one does), every pytest worker rewrote each test module's assertions from source again
# (8 s of its 16 s collection) and every server, command line and Ray worker compiled the project's modules again
unset PYTHONDONTWRITEBYTECODE

# The pinned requirements installed by uv, their bytecode compiled (the same wheels as pip, in less time: everything
# the tests need into a new virtual environment in 26 s against pip's 65 s, docs/contributing.md), into the
# environment of the python3 on PATH (a virtual environment's or not); by pip where uv cannot be installed or fails
install() {
    if python3 -m pip install --quiet --disable-pip-version-check uv==0.13.9 >/dev/null 2>&1 \
        && python3 -m uv pip install --quiet --compile-bytecode \
            --python "$(python3 -c 'import sys; print(sys.executable)')" "$@"; then
        return 0
    fi
    echo "note: installing with pip (uv could not be installed or failed)" >&2
    python3 -m pip install --quiet --disable-pip-version-check "$@"
}

if [ "${1:-}" = "--quick" ]; then
    shift
    install -r requirements-dev.txt
    export TF_CPP_MIN_LOG_LEVEL=2
    python3 -m ruff check .
    exec python3 -m pytest --quick -n 2 "$@"
fi

# Debian's chromium-headless-shell (the browser tests: tests/browser/served.py) and chromium (bench/latency.py, what a
# user runs) are installed while uv installs the Python packages: the two downloads overlap
APT_PID=""
APT_LOG="$(mktemp)"
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromium-headless-shell >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    # the headless shell is a saving, not a need: where apt cannot install it, the browser tests run on chromium
    ( $SUDO apt-get update -qq && { $SUDO apt-get install -y -qq chromium chromium-headless-shell \
        || { $SUDO apt-get install -y -qq chromium \
             && echo "note: chromium-headless-shell not installed; the browser tests use chromium"; }; } ) >"$APT_LOG" 2>&1 &
    APT_PID=$!
fi
# one resolver run for everything the tests need: the dashboard and its tests (requirements-dev.txt); the optional
# Ray engine (--engine ray: tests/unit/batch/test_ray_batch.py); the optional JAX backend (KERAS_BACKEND=jax:
# tests/unit/core/test_backends.py); the docs site (tests/unit/test_docs.py builds it with mkdocs build --strict)
install -r requirements-dev.txt -r requirements-ray.txt -r requirements-jax.txt -r requirements-docs.txt
if [ -n "$APT_PID" ] && ! wait "$APT_PID"; then
    cat "$APT_LOG" >&2
    echo "error: apt-get could not install Debian's chromium (the browser tests need it)" >&2
    exit 1
fi
rm -f "$APT_LOG"
export TF_CPP_MIN_LOG_LEVEL=2
# the declared style (pyproject.toml [tool.ruff]) before the tests (the docs site is built by tests/unit/test_docs.py)
python3 -m ruff check .
# Three workers on two cores: a third of the time a test waits (a browser drawing, a server or a Ray cluster
# starting, a subprocess), and the third worker fills it. --dist loadfile keeps a file's module fixtures (a
# trained model, a server) on one worker, and the files that share a session fixture (one local Ray, the demo's
# server: SHARED_BY_FILES in tests/conftest.py) together; xdist hands out the units with the most tests first (the
# longest files first instead, the JAX re-runs, Ray and the browser all at the start, took 1,016-1,054 s against
# 866-938 s: docs/contributing.md).
python3 -m pytest -n "${TEST_WORKERS:-3}" --dist loadfile "$@"

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

if [ "${1:-}" = "--quick" ]; then
    shift
    python3 -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
    export TF_CPP_MIN_LOG_LEVEL=2
    python3 -m ruff check .
    exec python3 -m pytest --quick -n 2 "$@"
fi

# Debian's chromium-headless-shell (the browser tests: tests/browser/served.py) and chromium (bench/latency.py, what a
# user runs) are installed while pip installs the Python packages: the two downloads overlap
APT_PID=""
APT_LOG="$(mktemp)"
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromium-headless-shell >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    # the headless shell is a saving, not a need: where apt cannot install it, the browser tests run on chromium
    ( $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium \
        && { $SUDO apt-get install -y -qq chromium-headless-shell \
             || echo "note: chromium-headless-shell not installed; the browser tests use chromium"; } ) >"$APT_LOG" 2>&1 &
    APT_PID=$!
fi
# one resolver run for everything the tests need: the dashboard and its tests (requirements-dev.txt); the optional
# Ray engine (--engine ray: tests/unit/batch/test_ray_batch.py); the optional JAX backend (KERAS_BACKEND=jax:
# tests/unit/core/test_backends.py); the docs site (tests/unit/test_docs.py builds it with mkdocs build --strict)
python3 -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -r requirements-ray.txt \
    -r requirements-jax.txt -r requirements-docs.txt
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

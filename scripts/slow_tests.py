"""Write tests/slow_tests.txt, the tests that ``bash scripts/test.sh --quick`` leaves out, from a full run's timings.

    CI=true bash scripts/test.sh -q --durations=0 > full.log
    python -m pytest --quick -q --durations=0 > quick.log
    python scripts/slow_tests.py full.log quick.log    # rewrites tests/slow_tests.txt

A test is slow when its setup, call and teardown together took more than ``LIMIT_S`` seconds in one of those
runs (a module's shared fixture is counted in the test that first asked for it: leaving that test out moves the
fixture's cost to the next one, which the quick run's own timings then catch). New tests are quick until a run
measures them; regenerate the list after adding slow ones. The quick run also leaves out whole kinds of tests
(``tests/conftest.py``: ``QUICK_LEAVES_OUT``): the browser, Ray, JAX in a subprocess.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LIMIT_S = 1.0
OUT = Path(__file__).resolve().parents[1] / "tests" / "slow_tests.txt"
LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(tests/.+)$")


def slow_tests(log: str, limit: float = LIMIT_S) -> list[str]:
    spent: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        found = LINE.match(line.rstrip())
        if found:
            spent[found.group(3)] += float(found.group(1))
    if not spent:
        raise SystemExit("no timings found: run pytest with --durations=0 and give its output")
    return sorted(node for node, seconds in spent.items() if seconds > limit)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    nodes = sorted(set().union(*(slow_tests(Path(log).read_text(encoding="utf-8", errors="replace"))
                                 for log in sys.argv[1:])))
    OUT.write_text(f"# tests over {LIMIT_S:g} s in a full run (scripts/slow_tests.py); left out by --quick\n"
                   + "\n".join(nodes) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(nodes)} tests")

"""explain.core.kept.Kept: the bounded, least-recently-used store the modules keep per-bundle results in."""

import threading

from explain.core.kept import Kept


def test_a_value_is_made_once_and_the_least_recently_used_is_dropped_first():
    made = []
    kept = Kept(2)

    def make(key):
        return lambda: made.append(key) or f"value {key}"

    assert kept.get("a", make("a")) == "value a" and kept.get("a", make("a")) == "value a"
    kept.get("b", make("b"))
    kept.get("a", make("a"))        # "a" used last: "b" is the oldest now
    kept.get("c", make("c"))        # drops "b"
    assert len(kept) == 2 and made == ["a", "b", "c"]
    kept.get("a", make("a"))
    kept.get("b", make("b"))        # made again
    assert made == ["a", "b", "c", "b"]


def test_a_key_of_none_is_never_kept_and_clear_forgets_everything():
    kept, made = Kept(4), []
    for _ in range(3):
        kept.get(None, lambda: made.append(1))
    assert len(made) == 3 and len(kept) == 0
    kept.get("x", lambda: 1)
    kept.clear()
    assert len(kept) == 0


def test_threads_asking_at_once_all_get_a_value_and_the_store_stays_bounded():
    kept, errors = Kept(3), []

    def ask(i):
        try:
            assert kept.get(i % 5, lambda: i % 5) == i % 5
        except AssertionError as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(kept) <= 3

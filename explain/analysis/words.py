"""Why one customer scores what they score, in the analyst's words: one story for every kind of bundle.

    C00877 is 99 % likely to churn (26 % of customers churn): higher than for the average customer (6 %), mainly
    because support calls averaged 6 calls in the last 2 months (the average customer: 1.2 calls), raising the risk
    by 0.21.

:func:`story` writes the Customer page's words (the dashboard, ``explain.figures.customer`` and the HTML report
call it): the sentence above, the reasons one by one (each with the customer's value, what it is compared with and
its effect, in the bundle's display names and units), the known outcome when the bundle has labels ("the model
missed this one"), the customer's history length when it is padded ("no data before ...") and why the "What would
keep this customer?" search cannot run, where it cannot. The same code for plain, padded, embedding and many-input
bundles: every input is read by its key, and padded periods are no data (never in a window, never averaged into a
value or a reference). Features of one group (``explain.analysis.groups``: declared in bundle.json, or found
because they move together) that push the score the same way are one reason in the first sentence, their effects
summed (exact: IG is additive), each member still said with its value and reference and listed below, marked with
its group. Arrays in, text out: no model call (the categorical baseline of a model with categories
is built from the data, as the engine builds it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explain.core import labels
from explain.core import verdict as verdicts
from explain.core.kept import Kept
from explain.core.periods import Words, unit_of
from explain.core.periods import words as periods_words
from explain.core.settings import Baseline
from explain.core.text import unit_after

SHARE_MAIN = 0.2  # a driver with at least this share of the explained difference is a main reason
WINDOW_COVER = 0.7  # a feature's window: the fewest contiguous periods holding this share of its effect of that sign
HEADLINE_REASONS = 2  # main reasons named in the first sentence at most
REASONS = 5  # reasons listed one by one
MISSES = 50  # customers the misses picker lists

REFERENCES = {"mean": "the average customer", "median": "the median customer", "zero": "zero",
              "flat": "their own average", "blur": "their own smoothed history"}
KEEP_CATEGORIES = ("The search for a few changes that would keep this customer edits numbers; this model also reads "
                   "{names} as categories, so it is not searched here (the effects above still say why).")
KEEP_SEVERAL = ("The search for a few changes that would keep this customer edits one customer table and one "
                "history; this model reads {count} inputs ({names}), so it is not searched here.")


@dataclass(frozen=True)
class Driver:
    """One reason: an input feature (over a window of periods for a history) and what it did."""

    label: str
    effect: float  # the sum of its attributions there (the prediction's units)
    value: float | str | None  # the customer's value (the mean over the window's periods with data)
    reference: float | str | None  # the baseline's value there, when known
    periods: tuple[str, str] | None = None  # first and last period of the window (a history feature)
    unit: str = ""
    when: str = ""  # the window in words: " in the last 2 months (2025-11 to 2025-12)", " in 2025-03"
    count: int = 1  # periods with data in the window (a value over several is their mean)
    yes_no: bool = False  # a 0/1 feature
    column: str = ""  # the table column (what a feature group lists)
    arrived: bool = False  # a change since an earlier time: the window held no data then (padding)


@dataclass(frozen=True)
class GroupDriver:
    """Members of one feature group (``explain.analysis.groups``) that push the score the same way, said as one
    reason: its effect is the sum of theirs (exact: IG is additive), each member keeping its value and reference."""

    label: str  # the group's name
    members: tuple  # (Driver, ...) largest effect first, two or more
    found: bool = True  # found from the data (they move together); False: declared in bundle.json

    @property
    def effect(self) -> float:
        return float(sum(m.effect for m in self.members))


@dataclass(frozen=True)
class Story:
    """The Customer page's words about one customer (``explain.figures.customer`` draws them with the figures)."""

    customer: str
    headline: str  # the first sentence: the score, what is usual, the main reasons with value, reference, effect
    reasons: list[str]  # the largest effects one by one, either way
    reference: str  # who the customer is compared with, in words ("the average customer")
    verdict: verdicts.Verdict | None = None  # the risk band of the score (output space)
    outcome: str | None = None  # "Known outcome: churned." (+ "the model missed this one ..."), with labels
    missed: bool = False  # the known outcome contradicts the verdict's outer bands
    history: str | None = None  # "No data before 2024-08-19 (the customer's first week): ..." for a short history
    keep: str | None = None  # why "What would keep this customer?" is not searched for this model, else None
    drivers: list[Driver] = field(default_factory=list)  # every reason found, largest effect first
    groups: list[GroupDriver] = field(default_factory=list)  # the groups said as one reason, largest effect first

    def text(self) -> str:
        """Everything as plain text, one paragraph per part (the notebook's ``print``, the CLI)."""
        parts = [self.headline, *([self.outcome] if self.outcome else []), *([self.history] if self.history else [])]
        return "\n".join(parts + [f"- {r}" for r in self.reasons] + ([self.keep] if self.keep else []))


# ----------------------------------------------------------------------------- who the customer is compared with


def churn_like(bundle, target: str) -> bool:
    """Whether the label and the output speak of churn (then the outcome words are "churned" and "stayed")."""
    return "churn" in f"{getattr(bundle, 'label_name', '') or ''} {target}".lower()


def outcome_word(bundle, value, target: str = "churn") -> str:
    """A label value in words: "churned" / "stayed" for a churn label; "arrest" / "no arrest" for another label
    with two values (the positive one first); else "<label> = <value>"."""
    found, positive, _ = label_facts(bundle)
    yes = positive is not None and labels.same(value, positive)
    if churn_like(bundle, target):
        return "churned" if yes else "stayed"
    name = getattr(bundle, "label_name", None) or "label"
    if len(found) == 2:
        return name if yes else f"no {name}"
    return f"{name} = {labels.text(value)}"


CHANGE_SNAPSHOT = "the earlier snapshot"
CHANGE_ARRIVED = ("{periods} hold data now and held none then (the history was shorter): their arrival {moved} "
                  "(counted in the change, spread evenly over those {units}).")


def change_reference(spec, bundle=None) -> str | None:
    """Who the customer is compared with when the baseline is the customer earlier: "a month earlier", "3 weeks
    earlier", "the earlier snapshot"; None for the other baselines."""
    spec = Baseline.parse(spec)
    if spec.kind == "bundle":
        return CHANGE_SNAPSHOT
    if spec.kind != "previous":
        return None
    said = periods_words(bundle) if bundle is not None else Words("month")
    back = spec.periods_back
    return f"a {said.unit} earlier" if back == 1 else f"{said.count(back)} earlier"


def _is_change(reference: str) -> bool:
    return reference == CHANGE_SNAPSHOT or reference.endswith(" earlier")


def change_since(spec, bundle) -> str:
    """When the earlier score was made, in words: "since 2025-11" (previous:K: the period K before the last), "since
    the earlier snapshot (up to 2025-11)" (bundle:DIR: its last period)."""
    spec = Baseline.parse(spec)
    if spec.kind == "previous":
        periods = [str(p) for p in bundle.periods]
        back = spec.periods_back
        return f"since {periods[-1 - back]}" if back < len(periods) else f"over the last {len(periods)} periods"
    try:
        from explain.analysis.explainer import open_snapshot

        last = str(open_snapshot(spec.argument).periods[-1])
    except Exception:  # noqa: BLE001 - the words do without the snapshot's last period
        return f"since {CHANGE_SNAPSHOT}"
    # histories aligned by their first period (padded at the end): the last label is no date to say
    same = last == str(bundle.periods[-1]) or getattr(bundle, "temporal_padding", "start") == "end"
    return f"since {CHANGE_SNAPSHOT}" if same else f"since {CHANGE_SNAPSHOT} (up to {last})"


def reference_name(spec, bundle=None, target: str = "churn") -> str:
    """Who the customer is compared with, by baseline kind: mean -> "the average customer", median -> "the median
    customer", customer:ID -> "customer ID", cohort:V -> "the average customer who stayed", zero -> "zero",
    flat / blur -> the customer's own level, sample:K -> "the average of K sampled customers"."""
    spec = Baseline.parse(spec)
    if spec.change:
        return change_reference(spec, bundle)
    if spec.kind == "customer":
        return f"customer {spec.argument}"
    if spec.kind == "cohort":
        if bundle is not None and churn_like(bundle, target):
            return f"the average customer who {outcome_word(bundle, spec.argument, target)}"
        return f"the average customer with {outcome_word(bundle, spec.argument, target)}"
    if spec.kind == "sample":
        return f"the average of {spec.argument} sampled customers"
    return REFERENCES.get(spec.kind, "the baseline")


def base_rate(bundle, target: str, scores=None) -> str:
    """What is usual, in words: the share of customers with the positive label ("26 % of customers churn"), else
    the average of ``scores`` (every customer's: "customers score 40 % on average", never "the average customer",
    which is the mean baseline's name in the same sentence); "" when neither is known."""
    _, positive, rows = label_facts(bundle)
    if positive is not None:
        share = float(np.mean(rows))
        return _percent(f"{share:.0%} of customers {target}")
    if scores is not None and len(scores):
        return _percent(f"customers score {float(np.mean(scores)):.0%} on average")
    return ""


_FACTS = Kept(8)  # content hash -> label_facts(bundle): read once per bundle, not per page run


def label_facts(bundle) -> tuple[list[str], str | None, np.ndarray | None]:
    """(the label values as text, the positive label, (n,) bool: customers with the positive label), or
    ([], None, None) without labels; kept per bundle content (``content_hash``), so that a page run does not read
    every label again (a Python pass over 10^6 labels takes about a second)."""
    hashed, found = getattr(bundle, "content_hash", ""), getattr(bundle, "labels", None)
    key = (hashed, None if found is None else len(found)) if hashed else None  # a copy without labels: its own

    def read():
        found, positive = labels.values(bundle), labels.positive(bundle)
        return found, positive, None if positive is None else _positive_rows(bundle, positive)

    return _FACTS.get(key, read)


def _positive_rows(bundle, positive: str) -> np.ndarray:
    """(n,) bool: customers whose label is ``positive`` (numbers compared as numbers, vectorised)."""
    values = np.asarray(bundle.labels)
    try:
        number = float(positive)
    except ValueError:
        number = None
    if values.dtype.kind in "fiu" and number is not None:
        return values.astype(np.float64) == number
    return labels.mask(values, positive)


# ----------------------------------------------------------------------------- the drivers


def _window(effects: np.ndarray, sign: float) -> tuple[int, int]:
    """The fewest contiguous periods that hold ``WINDOW_COVER`` of the feature's effect of this sign (the larger
    such run when several are as short): where in the history the feature mattered. A spike next to a broad
    effect does not hide the broad one (a run around the largest period alone said 0.02 of an effect of 0.33).
    Periods without data (NaN) add nothing, so a window never starts or ends on them."""
    mass = np.where(np.isnan(effects), 0.0, np.maximum(effects * sign, 0.0))
    need = WINDOW_COVER * float(mass.sum())
    best, held, first = (0, len(mass) - 1), 0.0, 0
    best_held = -1.0
    for last, cell in enumerate(mass):  # two pointers: mass is never negative
        held += cell
        while first < last and held - mass[first] >= need:
            held -= mass[first]
            first += 1
        if held >= need and ((last - first) < (best[1] - best[0]) or
                             ((last - first) == (best[1] - best[0]) and held > best_held)):
            best, best_held = (first, last), held
    return best


def _views(bundle):
    from explain.analysis.report import input_views  # the inputs as every report lists them

    return input_views(bundle)


def _names(bundle, view) -> list[tuple[str, str]]:
    """(display name, unit) of each column of an input."""
    units = getattr(bundle, "units", {}) or {}
    if getattr(bundle, "plain", True):
        shown = bundle.static_labels if view.role == "static" else bundle.temporal_labels
    else:
        shown = [bundle.feature_labels.get(c, c) for c in view.features]
    return [(str(label), units.get(c, "") or "") for label, c in zip(shown, view.features)]


def _category(bundle, column, value) -> str:
    """A category by its display text (``categories`` in bundle.json), else as it is."""
    names = (getattr(bundle, "categories", {}) or {}).get(column, {})
    if isinstance(value, (bytes, np.bytes_)):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, (str, np.str_)) and float(value).is_integer():
        value = int(value)
    return str(names.get(str(value), value))


def _static_drivers(bundle, view, attr, value, reference) -> list[Driver]:
    out = []
    numeric = np.asarray(value).dtype.kind in "fiub"
    for j, ((label, unit), column) in enumerate(zip(_names(bundle, view), view.features)):
        effect = float(attr[j])
        if not numeric or (getattr(bundle, "categories", None) or {}).get(column):
            ref = None if reference is None else _category(bundle, column, np.ravel(reference)[j])
            out.append(Driver(label, effect, _category(bundle, column, value[j]), ref, column=column))
            continue
        ref = None if reference is None else float(np.ravel(reference)[j])
        out.append(Driver(label, effect, float(value[j]), ref, None, unit_after(label, unit) or "",
                          yes_no=unit == "0/1", column=column))
    return out


def _when(periods, first: int, last: int, said: Words) -> str:
    """The window in words: " in the last 2 months" when it reaches the history's end, else " in 2025-03 to
    2025-08" (" in 2025-03" for one period)."""
    if last == len(periods) - 1:
        n = last - first + 1
        return f" in the last {said.unit}" if n == 1 else f" in the last {said.count(n)}"
    return f" in {periods[first]}" if first == last else f" in {periods[first]} to {periods[last]}"


def _snap(value: float) -> float:
    """A reference within 2e-6 of a whole number is that number (a baseline period moved off a padding value by a
    tiny offset is said as the value it stands for)."""
    return float(round(value)) if abs(value - round(value)) <= 2e-6 else value


def _period_words(bundle, periods: list[str]) -> Words:
    """How a history's periods are said: the bundle's words (its period unit) for its own periods, else found from
    these periods' labels (another history of a many-input bundle)."""
    return periods_words(bundle) if periods == [str(p) for p in bundle.periods] else Words(unit_of(periods))


def _temporal_drivers(bundle, view, attr, value, reference, pad, *, then_pad=None) -> list[Driver]:
    """The history's drivers; ``then_pad`` (T,): the periods that were padding in the reference (a change since an
    earlier time: those periods arrived since then; the reference there is no value)."""
    periods = [str(p) for p in view.periods]
    said = _period_words(bundle, periods)
    attr = np.asarray(attr, np.float64).reshape(len(periods), -1)  # (T, F)
    real = np.ones(len(periods), bool) if pad is None else ~np.asarray(pad, bool)  # periods with data
    attr = np.where(real[:, None], attr, np.nan)
    numeric = np.asarray(value).dtype.kind in "fiub"
    history = np.asarray(value).reshape(len(periods), -1)
    base = None if reference is None else np.asarray(reference, np.float64).reshape(len(periods), -1)
    out = []
    for j, ((label, unit), column) in enumerate(zip(_names(bundle, view), view.features)):
        total = float(np.nansum(attr[:, j]))
        if total == 0.0 or not real.any():
            continue
        a, b = _window(attr[:, j], np.sign(total))
        cells = real[a:b + 1]
        effect = float(np.nansum(attr[a:b + 1, j]))
        when = _when(periods, a, b, said)
        if not numeric or (getattr(bundle, "categories", None) or {}).get(column):
            out.append(Driver(label, effect, _category(bundle, column, history[b, j]), None, (periods[a], periods[b]),
                              when=when, column=column))
            continue
        own = float(np.mean(history[a:b + 1, j].astype(np.float64)[cells]))
        known = cells if then_pad is None else cells & ~np.asarray(then_pad[a:b + 1], bool)  # data then too
        ref = None if base is None or not known.any() else _snap(float(np.mean(base[a:b + 1, j][known])))
        out.append(Driver(label, effect, own, ref, (periods[a], periods[b]), unit_after(label, unit) or "", when,
                          int(cells.sum()), unit == "0/1", column, arrived=base is not None and not known.any()))
    return out


def drivers(attribution, bundle, i: int, values: dict, reference: dict | None = None) -> list[Driver]:
    """Every input feature of customer ``i`` with a non-zero effect, largest first (either way).

    ``values``: the customer's inputs by key (``bundle.inputs_for([id])`` row 0); ``reference``: the baseline's by
    key (numbers; a category by its id), where known. A history feature is read over the window of periods where
    its effect sits, padded periods left out."""
    found = []
    for view in _views(bundle):
        attr = np.asarray(attribution.inputs[view.key][i])
        ref = None if reference is None else reference.get(view.key)
        if view.role == "static":
            found += _static_drivers(bundle, view, np.ravel(attr).astype(np.float64), np.ravel(values[view.key]), ref)
        else:
            pad = attribution.padding.get(view.key)
            found += _temporal_drivers(bundle, view, attr, values[view.key], ref, None if pad is None else pad[i],
                                       then_pad=_padding_of(bundle, view.key, ref))
    found = [d for d in found if d.effect != 0.0 and np.isfinite(d.effect)]
    return sorted(found, key=lambda d: -abs(d.effect))


def _padding_of(bundle, key: str, values) -> np.ndarray | None:
    """(T,) the periods of one reference history at the mask value (padding then), or None."""
    layout = getattr(bundle, "layout", None)
    if values is None or layout is None or getattr(bundle, "plain", True):
        return None
    spec = layout.spec(key)
    return None if spec.mask_value is None else spec.padding(np.asarray(values)[None])[0]


def grouped(found: list[Driver], groups=()) -> list:
    """The reasons at group level, largest effect first: where two or more members of a feature group (``groups``:
    ``explain.analysis.groups.FeatureGroup``, name and columns) are among ``found`` and all push the same way, one
    :class:`GroupDriver` (their summed effect) in their place; members that push opposite ways stay apart."""
    group_of = {str(c): g for g in groups for c in g.features}
    members: dict = {}
    for d in found:
        if d.column in group_of:
            members.setdefault(group_of[d.column].name, []).append(d)
    together = {name: ds for name, ds in members.items() if len(ds) >= 2 and len({d.effect > 0 for d in ds}) == 1}
    out, said = [], set()
    for d in found:
        group = group_of.get(d.column)
        if group is None or group.name not in together:
            out.append(d)
        elif group.name not in said:
            said.add(group.name)
            out.append(GroupDriver(group.name, tuple(together[group.name]), bool(group.found)))
    return sorted(out, key=lambda d: -abs(d.effect))


# ----------------------------------------------------------------------------- in words


def _number(value: float) -> str:
    value = float(value)
    if abs(value) >= 10 or value.is_integer():
        return f"{value:,.0f}"
    return f"{value:.2g}"


def _effect(value: float) -> str:
    return f"{abs(value):.2f}" if abs(value) >= 0.01 else f"{abs(value):.2g}"


def _percent(text: str) -> str:
    return text.replace("%", " %")


def _name(label: str) -> str:
    return label if label[:2].isupper() else label[:1].lower() + label[1:]


def _shown(value, unit: str, yes_no: bool) -> str:
    """A value in words: a 0/1 feature's "yes" / "no", or its share of yes ("47 % yes"); else the number and unit."""
    if yes_no and 0.0 <= float(value) <= 1.0:
        if float(value) in (0.0, 1.0):
            return "yes" if float(value) == 1.0 else "no"
        return _percent(f"{float(value):.0%} yes")
    return f"{_number(value)}{f' {unit}' if unit else ''}"


def _countable(driver: Driver) -> bool:
    """Whether "no <name>" says a zero (a count in a plural unit: "no support calls"), not "no share of ..."."""
    return bool(driver.unit) and driver.unit.endswith("s") and driver.unit != "0/1"


def phrase(driver: Driver, reference: str) -> str:
    """The customer's value and what it is compared with: "support calls averaged 6 calls in the last 2 months
    (the average customer: 1.2 calls)", "tenure is 6 months (the average customer: 30 months)"."""
    name = _name(driver.label)
    if _is_change(reference) and driver.arrived:  # no data then: no "from"
        return f"{name}: {_shown(driver.value, driver.unit, driver.yes_no)}{driver.when} (no data then)"
    if _is_change(reference) and driver.reference is not None:
        return _change_phrase(driver, name, reference)
    if driver.reference is None:
        compared = f" (compared with {reference})"
    else:
        shown = driver.reference if isinstance(driver.reference, str) else _shown(driver.reference, driver.unit,
                                                                                  False)
        if not isinstance(driver.reference, str) and driver.yes_no:
            shown = _shown(driver.reference, "", True)
        compared = f" (against {shown})" if reference == REFERENCES["zero"] else f" ({reference}: {shown})"
    if isinstance(driver.value, str) or driver.value is None:
        return f"{name} is {driver.value}{driver.when}{compared}"
    value = _shown(driver.value, driver.unit, driver.yes_no)
    if driver.periods is None:
        return f"{name}: {value}{compared}" if driver.yes_no else f"{name} is {value}{compared}"
    if driver.yes_no:  # yes or no all along the window, else the share of its periods with yes
        share = float(driver.value)
        said = value if share in (0.0, 1.0) else f"yes {_percent(f'{share:.0%}')} of the time"
        return f"{name}: {said}{driver.when}{compared}"
    if driver.value == 0 and (_countable(driver) or driver.unit == "" and driver.label.endswith("s")):
        return f"no {name}{driver.when}{compared}"
    if driver.count > 1:
        return f"{name} averaged {value}{driver.when}{compared}"
    if driver.reference is None or isinstance(driver.reference, str) or np.isclose(driver.value, driver.reference):
        return f"{name} was {value}{driver.when}{compared}"
    verb = "reached" if driver.value > driver.reference else "dropped to"
    return f"{name} {verb} {value}{driver.when}{compared}"


def _change_phrase(driver: Driver, name: str, reference: str) -> str:
    """What changed since the earlier time: "support calls went from 1 to 6 in 2025-12", "tenure went from 11 to 12
    months", "data usage went from an average of 4.6 to 2.8 in the last 2 months"; a value that did not change
    (its effect comes from the order of the periods around it): "... stayed at 11 ... (as {reference})"."""
    if isinstance(driver.value, str) or isinstance(driver.reference, str) or driver.value is None:
        if str(driver.value) == str(driver.reference):
            return f"{name} stayed {driver.value}{driver.when}"
        return f"{name} went from {driver.reference} to {driver.value}{driver.when}"
    then = _shown(driver.reference, "" if driver.yes_no else driver.unit, driver.yes_no)
    now = _shown(driver.value, driver.unit, driver.yes_no)
    if np.isclose(float(driver.value), float(driver.reference)) or then == now:  # the same number when said
        return f"{name} stayed at {'an average of ' if driver.count > 1 else ''}{now}{driver.when} (as {reference})"
    if not driver.yes_no and driver.unit and then.endswith(f" {driver.unit}"):
        then = then[:-len(driver.unit) - 1]  # "from 1 to 6 calls", the unit said once
    return f"{name} went from {'an average of ' if driver.count > 1 else ''}{then} to {now}{driver.when}"


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def group_phrase(group: GroupDriver, reference: str) -> str:
    """A group's members with their values and references, the group named once: "employment (employed and share
    of weeks employed so far): employed: no in the last 20 weeks (the average customer: 45 % yes) and ..." for a
    declared group; a group found from the data is named by its members, "which move together"."""
    labels = _and([_name(m.label) for m in group.members])
    named = f"{labels}, which move together" if group.found else f"{_name(group.label)} ({labels})"
    return f"{named}: {_and([phrase(m, reference) for m in group.members])}"


def effect_words(effect: float, noun: str = "the risk", again: bool = False) -> str:
    """ "raises the risk by 0.07" / "lowers it by 0.03" (``again``: the noun said before)."""
    verb = "raises" if effect > 0 else "lowers"
    return f"{verb} {'it' if again else noun} by {_effect(effect)}"


def _noun(space: str, probability: bool) -> str:
    """What an effect moves: the risk (a probability), the log-odds, or the score."""
    if space != "output":
        return "the log-odds"
    return "the risk" if probability else "the score"


def _ing(words: str) -> str:
    return words.replace("raises", "raising", 1).replace("lowers", "lowering", 1)


def _because(item, reference: str, noun: str, again: bool) -> str:
    """One main reason of the first sentence: a driver, or a group with its members' values and summed effect."""
    if isinstance(item, GroupDriver):
        return f"{group_phrase(item, reference)}, {_ing(effect_words(item.effect, noun, again))} in all"
    return f"{phrase(item, reference)}, {_ing(effect_words(item.effect, noun, again))}"


def compared_with(reference_score: float, gap: float, reference: str, probability: bool = True) -> str:
    """ "higher than for the average customer (6 %)": the customer's score against the reference's (``gap``: the
    customer's minus the reference's)."""
    said = ("less than 1 %" if reference_score < 0.005 else "over 99 %" if reference_score >= 0.995 else
            _percent(f"{reference_score:.0%}")) if probability else f"{reference_score:.2f}"
    who = "a customer with every value at 0" if reference == REFERENCES["zero"] else reference
    return f"{'higher' if gap > 0 else 'lower'} than for {who} ({said})"


def _likely(score: float) -> str:
    return "less than 1 %" if score < 0.005 else "over 99 %" if score >= 0.995 else _percent(f"{score:.0%}")


def change_head(customer: str, score: float, gap: float, *, target: str, space: str = "output",
                since: str = "") -> str:
    """ "C00042's risk rose from 31 % to 78 % since 2025-11": the change the attributions explain (``gap``: the score
    now minus then)."""
    probability = space == "output" and 0.0 <= score <= 1.0 and 0.0 <= score - gap <= 1.0
    what = "risk" if probability else f"{'log-odds' if space != 'output' else 'score'} for {target}"
    shown = _likely if probability else (lambda value: f"{value:.2f}")
    if abs(gap) >= 5e-5 and shown(score) == shown(score - gap):  # more digits where they would read the same
        shown = (lambda value: _percent(f"{value:.2%}")) if probability else (lambda value: f"{value:.4g}")
    if abs(gap) < 5e-5 or shown(score) == shown(score - gap):
        return f"{customer}'s {what} stayed at {shown(score)} {since}".rstrip()
    verb = "rose" if gap > 0 else "fell"
    return f"{customer}'s {what} {verb} from {shown(score - gap)} to {shown(score)} {since}".rstrip()


def why_sentence(customer: str, score: float, target: str, found: list, *, reference: str,
                 base_rate: str = "", space: str = "output", gap: float | None = None, since: str | None = None) -> str:
    """The first sentence: the score, what is usual, and the main reasons that moved it with value, reference and
    effect. ``found``: drivers (and groups, :func:`grouped`) largest first; those that push the score the way it
    moved (``gap``: prediction minus the baseline's; default the sum of the effects) are named. ``since``: the
    baseline is the customer earlier (:func:`change_since`): the sentence says how the score changed since then."""
    probability = space == "output" and 0.0 <= score <= 1.0
    customer = f"Customer {customer}" if str(customer).isdigit() else customer  # "Customer 7", not "7 is ..."
    gap = sum(d.effect for d in found) if gap is None else gap
    if since is not None:
        head = change_head(customer, score, gap, target=target, space=space, since=since)
        head += f" ({base_rate})" if base_rate else ""
    else:
        head = f"{customer} is {_likely(score)} likely to {target}" if probability else (
            f"{customer} scores {score:.2f} for {target}" + (" (log-odds)" if space != "output" else ""))
        head += f" ({base_rate})" if base_rate else ""
        if gap != 0.0:  # what the effects explain: the difference from the reference's score, with its direction
            head += ": " + compared_with(score - gap, gap, reference, probability)
    pushing = [d for d in found if d.effect * (1 if gap >= 0 else -1) > 0]
    if not pushing:
        return head + "."
    total = sum(abs(d.effect) for d in pushing)
    main = [d for d in pushing if abs(d.effect) >= SHARE_MAIN * total][:HEADLINE_REASONS] or pushing[:1]
    noun = _noun(space, probability)
    said = [_because(d, reference, noun, again=k > 0) for k, d in enumerate(main)]
    return head + ", mainly because " + "; and ".join(said) + "."


def reason(driver: Driver, reference: str, noun: str = "the risk") -> str:
    """One reason as a sentence: "Support calls averaged 6 calls in the last 2 months (the average customer: 1.2
    calls) - raises the risk by 0.21."."""
    text = phrase(driver, reference)
    return f"{text[:1].upper()}{text[1:]} - {effect_words(driver.effect, noun)}."


def member_reason(driver: Driver, group: GroupDriver, reference: str, noun: str = "the risk") -> str:
    """A group member's reason, marked with its group: "Employed: no in the last 20 weeks (the average customer:
    45 % yes) - raises the risk by 0.25. Together with share of weeks employed so far (they move together): raises
    the risk by 0.39."."""
    others = _and([_name(m.label) for m in group.members if m is not driver])
    kind = "they move together" if group.found else f"the group {group.label}"
    return f"{reason(driver, reference, noun)} Together with {others} ({kind}): {effect_words(group.effect, noun)}."


def reasons_of(items: list, reference: str, noun: str = "the risk", limit: int = REASONS) -> list[str]:
    """The reasons one by one, the largest ``limit`` first (:func:`grouped`): a group's members each in its own
    line, marked with their group, where the group stands."""
    out = []
    for item in items[:limit]:
        members = item.members if isinstance(item, GroupDriver) else (item,)
        out += [member_reason(m, item, reference, noun) if m is not item else reason(m, reference, noun)
                for m in members]
    return out


# ----------------------------------------------------------------------------- known outcome and misses


def known_outcome(bundle, customer: str, said: verdicts.Verdict | None, target: str = "churn"
                  ) -> tuple[str | None, bool]:
    """("Known outcome: churned.", missed) for a bundle with labels, else (None, False). Missed: the score is in the
    highest risk band but the customer stayed, or in the lowest band but churned (the verdict's risk bands)."""
    if getattr(bundle, "labels", None) is None:
        return None, False
    value = bundle.labels[bundle.index_of(customer)]
    _, positive, _ = label_facts(bundle)
    churned = positive is not None and labels.same(value, positive)
    word = outcome_word(bundle, value, target)
    text = f"Known outcome: {word}."
    if said is None or not ((said.index == said.of - 1 and not churned) or (said.index == 0 and churned)):
        return text, False
    but = f"they {word}" if churn_like(bundle, target) else f"the outcome was {word}"
    return text + f" The model missed this one: it scores them {said.band} ({said.range_text}), but {but}.", True


def misses(bundle, scores, bands=None, limit: int = MISSES) -> tuple[list[str], list[str]]:
    """The model's misses among customers with a known outcome: (ids in the highest risk band who did not have the
    positive outcome, ids in the lowest band who did), each most wrong first, at most ``limit`` of each; ([], [])
    without labels. ``scores``: every customer's score (the verdict's); ``bands``: the verdict's risk bands."""
    _, positive, churned = label_facts(bundle)
    if positive is None:
        return [], []
    bands = tuple(bands or verdicts.bands_of(bundle))
    scores = np.asarray(scores, np.float64)
    high = np.flatnonzero((scores >= bands[-1].start) & ~churned)
    low = np.flatnonzero((scores < bands[1].start) & churned)
    high = high[np.argsort(-scores[high], kind="stable")][:limit]
    low = low[np.argsort(scores[low], kind="stable")][:limit]
    return [str(bundle.ids[k]) for k in high], [str(bundle.ids[k]) for k in low]


# ----------------------------------------------------------------------------- the story


def history_note(attribution, bundle, i: int) -> str | None:
    """For a customer whose (first) history is padded: how much data there is, padding said as "no data yet"."""
    for view in _views(bundle):
        pad = attribution.padding.get(view.key) if view.role == "temporal" else None
        if pad is None or not np.asarray(pad[i]).any():
            continue
        real = ~np.asarray(pad[i], bool)
        periods = [str(p) for p in view.periods]
        said = _period_words(bundle, periods)
        if not real.any():
            return f"No data yet: this customer has no {said.unit} of history, so only the other features count."
        first, last = int(np.argmax(real)), len(real) - 1 - int(np.argmax(real[::-1]))
        if first > 0:
            return (f"A short history: {said.count(int(real.sum()))} of data from {periods[first]} on; the "
                    f"{said.count(first)} before the customer's first {said.unit} are no data yet and count for "
                    "nothing.")
        return (f"A short history: {said.count(int(real.sum()))} of data up to {periods[last]}; the "
                f"{said.units} after it are no data and count for nothing.")
    return None


def keep_unavailable(bundle) -> str | None:
    """Why "What would keep this customer?" (the what-if search) cannot run on this bundle's model, or None when it
    can: it edits the numbers of one customer table and one history (padded or not)."""
    layout = getattr(bundle, "layout", None)
    if getattr(bundle, "plain", True) or layout is None:
        return None
    categorical = [s.key for s in layout.specs if s.embedding is not None or s.kind == "categorical"]
    if set(layout.engine_keys) == {"static", "temporal"} and not categorical:
        return None
    labels_of = getattr(bundle, "input_labels", {}) or {}
    if categorical:
        names = [labels_of.get(k, k) for k in categorical]
        return KEEP_CATEGORIES.format(names=" and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1
                                                         else names))
    keys = list(layout.engine_keys)
    return KEEP_SEVERAL.format(count=len(keys), names=", ".join(labels_of.get(k, k) for k in keys))


def references(bundle, customer: str, settings, shown: dict | None = None) -> dict:
    """The baseline's values by input key, as the words compare with them: the numbers the page shows (``shown``:
    ``explain.analysis.diagnostics.shown_baseline``, computed when None) and, for categorical inputs under a
    category rule, the baseline's category ids."""
    from explain.analysis.diagnostics import shown_baseline
    from explain.analysis.explainer import baseline_for

    out = dict(shown if shown is not None else shown_baseline(bundle, customer, settings))
    layout = getattr(bundle, "layout", None)
    if getattr(bundle, "plain", True) or layout is None:
        return out
    categorical = [s.key for s in layout.specs if s.kind == "categorical" and s.role == "static"]
    if categorical and settings.baseline.kind not in ("flat", "blur", "customer", "sample"):
        inputs = bundle.inputs_for([customer])
        base = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical, ids=[customer])
        for key in categorical:
            value = np.asarray(base.get(key))
            if value.shape == np.asarray(inputs[key]).shape:  # ids (a mean embedding has no category)
                out[key] = value[0]
    elif categorical and settings.baseline.kind == "customer":
        other = bundle.inputs_for([str(settings.baseline.argument)])
        out.update({key: np.asarray(other[key])[0] for key in categorical})
    return out


def story(attribution, bundle, i: int, customer: str, *, settings=None, reference: dict | None = None,
          scores=None, reasons: int = REASONS, groups=None) -> Story:
    """The Customer page's words about row ``i`` of ``attribution`` (customer id ``customer``).

    ``settings``: the request (its baseline names the reference; default the attribution's); ``reference``: the
    baseline's values by input key (:func:`references`; computed when None); ``scores``: every customer's score of
    the target (the base rate without labels and the verdict; default: the attribution's prediction); ``groups``:
    the bundle's feature groups (``explain.analysis.groups.of(bundle)`` when None): members of a group that push
    the same way are one reason, their effects summed."""
    settings = settings if settings is not None else attribution.settings
    target = str(bundle.output_names[attribution.settings.target])
    known = getattr(settings, "baseline", None) is not None  # integrated_gradients on arrays does not record it
    refs = reference if reference is not None else references(bundle, customer, settings) if known else {}
    values = {k: np.asarray(v)[0] for k, v in bundle.inputs_for([customer]).items()}
    found = drivers(attribution, bundle, i, values, refs)
    if groups is None:
        from explain.analysis import groups as feature_groups

        groups = feature_groups.of(bundle)
    items = grouped(found, groups)
    named = reference_name(settings.baseline, bundle, target) if known else "the baseline"
    space = attribution.space_used
    score = float(attribution.prediction[i]) if space == "output" else None
    if scores is not None:
        score = float(np.asarray(scores)[bundle.index_of(customer)])
    said = None if score is None else verdicts.verdict(score, verdicts.bands_of(bundle), target)
    gap = float(attribution.prediction[i] - attribution.baseline_prediction[i])
    change = known and settings.baseline.change
    headline = why_sentence(customer, float(attribution.prediction[i]), target, items, reference=named,
                            base_rate=base_rate(bundle, target, scores), space=space, gap=gap,
                            since=change_since(settings.baseline, bundle) if change else None)
    noun = _noun(space, 0.0 <= float(attribution.prediction[i]) <= 1.0)
    outcome, missed = known_outcome(bundle, customer, said, target)
    history = " ".join(filter(None, [history_note(attribution, bundle, i), arrival_note(attribution, bundle, i)]))
    return Story(customer, headline, reasons_of(items, named, noun, reasons), named, said, outcome, missed,
                 history or None, keep_unavailable(bundle), found, [d for d in items if isinstance(d, GroupDriver)])


def arrival_note(attribution, bundle, i: int) -> str | None:
    """For a change since an earlier time (``explain.core.change``): which periods arrived since then and what their
    arrival did, or None."""
    arrival = getattr(attribution, "arrival", None)
    if arrival is None or float(arrival[i]) == 0.0 or attribution.baselines is None:
        return None
    for view in _views(bundle):
        then, now = attribution.padding.get(view.key), attribution.baseline_of(i).get(view.key)
        if view.role != "temporal" or then is None or now is None:
            continue
        spec = bundle.layout.spec(view.key) if getattr(bundle, "layout", None) is not None else None
        padded_then = spec.padding(now[None])[0] if spec is not None and spec.mask_value is not None else None
        if padded_then is None:
            continue
        came = np.flatnonzero(padded_then & ~np.asarray(then[i], bool))
        if not came.size:
            continue
        periods = [str(p) for p in view.periods]
        said = _period_words(bundle, periods)
        where = periods[came[0]] if came.size == 1 else f"{said.count(came.size)} ({periods[came[0]]} to " \
                                                         f"{periods[came[-1]]})"
        moved = effect_words(float(arrival[i]), _noun(attribution.space_used, True))
        return CHANGE_ARRIVED.format(periods=where[:1].upper() + where[1:], moved=moved, units=said.units)
    return None

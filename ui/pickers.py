"""Sidebar and page pickers: ``*_ui()`` functions that draw widgets and return their values.

On a session's first run (and when the bundle changes) the link (:mod:`ui.url`) is read into
the widgets' session state; every run builds the one :class:`explain.core.settings.Settings` from
the widgets and writes the link back into the URL. Widget keys: ``customer``, ``baseline_kind``
with ``baseline_customer`` / ``baseline_cohort`` / ``blur_width`` / ``sample_k``, ``steps``,
``method``, ``target``, ``space``, ``path``; the pages' ``_compare`` and ``_sample`` (kept
across pages) with their widgets ``w_compare`` and ``w_sample``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import streamlit as st

from explain.analysis import words as analyst_words
from explain.core import labels, verdict
from explain.core.periods import words as periods_words
from explain.core.settings import DEFAULT_BLUR_WIDTH, DEFAULT_SAMPLES, Baseline, Settings
from ui import cache, input_views, options, show, url


@dataclass(frozen=True)
class Choice:
    """What the sidebar chose: the customer and the IG settings (target resolved)."""

    customer: str
    settings: Settings


# ----------------------------------------------------------------------------- link <-> widgets


def _load(link: url.Link, bundle) -> None:
    """Put a link's values into the widgets' session state."""
    ss, settings, base = st.session_state, link.settings, link.settings.baseline
    values = labels.values(bundle)
    ss["customer"], ss["_customer_note"], ss["_customer_matches"] = link.customer, None, []
    ss["baseline_kind"] = base.kind
    ss["baseline_customer"] = base.argument if base.kind == "customer" else str(bundle.ids[0])
    ss["baseline_cohort"] = base.argument if base.kind == "cohort" else (values[0] if values else None)
    ss["blur_width"] = base.width if base.kind == "blur" else DEFAULT_BLUR_WIDTH
    ss["sample_k"] = base.argument if base.kind == "sample" else DEFAULT_SAMPLES
    ss["previous_k"] = base.periods_back if base.kind == "previous" else 1
    ss["steps"], ss["method"], ss["space"], ss["path"] = (str(settings.steps), settings.method, settings.space,
                                                          settings.path)
    ss["target"] = bundle.output_names[settings.target]
    ss["_compare"], ss["_sample"] = url.compare_text(link.compare), link.sample


def _baseline() -> Baseline:
    ss = st.session_state
    kind = ss.get("baseline_kind", "mean")
    argument = {"customer": ss.get("baseline_customer"), "cohort": ss.get("baseline_cohort"),
                "blur": ss.get("blur_width", DEFAULT_BLUR_WIDTH), "sample": ss.get("sample_k", DEFAULT_SAMPLES),
                "previous": ss.get("previous_k", 1)}
    return Baseline(kind, argument.get(kind))


def _link(bundle) -> url.Link:
    """The link of the widgets' current values."""
    ss = st.session_state
    settings = Settings(baseline=_baseline(), steps=ss["steps"], method=ss["method"],
                        target=bundle.output_names.index(ss["target"]),
                        space=ss["space"], path=ss["path"],
                        categorical=ss.get("categorical", "mode")).resolved(bundle.output_names)
    return url.Link(customer=ss["customer"], settings=settings, compare=url.parse_compare(ss["_compare"]),
                    sample=ss["_sample"])


def init_state(bundle) -> None:
    """Read the URL on the session's first run, again when the bundle changes, and when the URL
    is not the one the session wrote (the browser's Back/Forward: the widgets follow the URL)."""
    if (st.session_state.get("_state_for") != bundle.content_hash or url.moved()
            or "customer" not in st.session_state):  # e.g. a run without the sidebar (the bundle failed) dropped it
        link, warnings = url.read(bundle, default_customer=cache.default_customer(bundle))
        _load(link, bundle)
        st.session_state["param_warnings"] = warnings
        st.session_state["_state_for"] = bundle.content_hash


# ----------------------------------------------------------------------------- sidebar widgets


def _copy(source: str, target: str) -> None:
    value = st.session_state.get(source)
    if value is not None:
        st.session_state[target] = value
    st.session_state[source] = None


def target_name(bundle) -> str:
    """The output the sidebar explains (its "Target" choice), by name; the bundle's own target until one is chosen."""
    return st.session_state.get("target") or bundle.output_names[bundle.target]


def random_label(bundle) -> str:
    """The random pick's button: "…or a random churner" on a churn label, "…or a random customer with arrest" on
    another label (its positive value in words), "…or a random high-risk customer" without labels."""
    positive = labels.positive(bundle)
    if positive is None:
        return "…or a random high-risk customer"
    target = target_name(bundle)
    if analyst_words.churn_like(bundle, target):
        return "…or a random churner"
    return f"…or a random customer with {analyst_words.outcome_word(bundle, positive, target)}"


def _random_churner(bundle) -> None:
    rng = st.session_state.setdefault("_rng", np.random.default_rng())
    positive = labels.positive(bundle)
    if positive is not None:
        rows = np.flatnonzero(labels.mask(bundle.labels, positive))
    else:  # no labels: a customer the model scores above 0.5
        rows = np.flatnonzero(cache.predictions(bundle, target_name(bundle)) > 0.5)
    rows = rows if rows.size else np.arange(bundle.n_customers)
    st.session_state["customer"] = str(bundle.ids[int(rng.choice(rows))])


def find_customer(ids: list[str], text) -> tuple[str | None, list[str], str | None]:
    """What the customer box's typed ``text`` names: (the id or None, the ids it matches, a note).

    An id as typed, in any case, or pasted with its box label ("C00017 · churn 0.42"); else the
    one id that contains the text (case-insensitive). Several or none: no id, the matches (first
    :data:`options.MATCHES_LISTED`) and a note that says what to do."""
    typed = str(text if text is not None else "").strip()
    pasted = re.match(r"(.+?)\s+·\s", typed) if typed not in ids else None  # a box label ("ID · churn 0.42")
    typed = pasted[1] if pasted else typed
    if typed in ids or not typed:
        return typed or None, [], None
    folded = typed.casefold()
    matches = [i for i in ids if folded in i.casefold()]
    exact = [i for i in matches if i.casefold() == folded]
    if len(exact) == 1 or len(matches) == 1:
        return (exact or matches)[0], [], None
    if not matches:
        return None, [], (f"No customer id contains '{typed}'. Ids look like {ids[0]}" +
                          (f" ... {ids[-1]}" if len(ids) > 1 else "") + ".")
    listed = matches[:options.MATCHES_LISTED]
    which = "they are" if len(listed) == len(matches) else f"the first {len(listed)} are"
    return None, listed, (f"'{typed}' is part of {len(matches)} customer ids; {which} listed in the box: "
                          "pick one, or type more of the id.")


def _typed_customer(bundle) -> None:
    """The customer box changed: an id typed or picked becomes the customer; text that names no
    single id keeps the customer shown and says why."""
    ss = st.session_state
    found, matches, note = find_customer(cache.ranking(bundle, cache.predictions(bundle, ss.get("target")),
                                                       options.TOP_RISK, ss.get("target"))[0], ss.get("customer"))
    found = found if found is not None else ss["_customer_recent"][0]  # the customer shown (customer_ui)
    if found != ss.get("customer"):  # written only when it differs: a value written is sent with the box again
        ss["customer"] = found
    ss["_customer_note"], ss["_customer_matches"] = note, matches


def customer_ui(bundle) -> str:
    """Customer: type an id (or part of one), or pick one of the highest-risk customers, or a random churner.

    Up to ``options.FULL_LIST`` customers the box lists them all; beyond, it lists the customers
    this session looked at last and the matches of a search, and takes any id typed: the box
    listing 3,000 ids took the browser 0.06-0.1 s to handle Enter, on every customer switch, and
    its 72 KB were sent again whenever its value changed."""
    ss = st.session_state
    # the sidebar's target: the box's scores and the highest-risk list follow it
    ids, top, label = cache.ranking(bundle, cache.predictions(bundle, ss.get("target")), options.TOP_RISK,
                                    ss.get("target"))
    current = ss["customer"]
    recent = [current] + [i for i in ss.get("_customer_recent", []) if i != current and i in label]
    ss["_customer_recent"] = recent[:options.RECENT]
    listed = ids if len(ids) <= options.FULL_LIST else list(dict.fromkeys(
        ss["_customer_recent"] + ss.get("_customer_matches", [])))
    st.selectbox("Customer (type an id, or part of one)" if listed is not ids else "Customer (type to search by id)",
                 listed, key="customer", format_func=lambda i: label.get(i, str(i)), accept_new_options=True,
                 filter_mode="contains", on_change=_typed_customer, args=(bundle,),
                 help=None if listed is ids else f"Lists the customers you looked at last. Any of the {len(ids):,} "
                      "ids can be typed: the whole id (any case) or a part that only one id has.")
    if note := ss.pop("_customer_note", None):  # once, on the run right after the typing
        st.warning(show.md(note), icon=":material/person_search:")
    st.selectbox(f"…or one of the {options.TOP_RISK} highest-risk customers", top, index=None, key="_top_pick",
                 placeholder="highest scores first", format_func=label.get,
                 on_change=_copy, args=("_top_pick", "customer"))
    st.button(random_label(bundle), key="_random", on_click=_random_churner, args=(bundle,), width="stretch",
              icon=":material/casino:")
    misses_ui(bundle, label)
    return st.session_state["customer"]


def misses_ui(bundle, label: dict) -> None:
    """The model's misses (a bundle with labels only): customers in the highest risk band whose known outcome is
    negative ("stayed"), then those in the lowest band whose outcome is positive ("churned"), most wrong first;
    the bands are the verdict's (``risk_bands`` in bundle.json, else low below 0.3, high from 0.6)."""
    if bundle.labels is None:
        return
    target = target_name(bundle)
    bands = verdict.bands_of(bundle)
    high, low = analyst_words.misses(bundle, cache.predictions(bundle, target), bands)
    found, positive, _ = analyst_words.label_facts(bundle)
    stayed = analyst_words.outcome_word(bundle, found[0], target) if len(found) > 1 else "negative"
    churned = analyst_words.outcome_word(bundle, positive, target)
    said = {**{i: stayed for i in high}, **{i: churned for i in low}}
    st.selectbox("…or one of the model's misses", high + low, index=None, key="_miss_pick",
                 placeholder=f"{len(high)} high risk, {len(low)} low risk",
                 format_func=lambda i: f"{label.get(i, i)} · {said.get(i, '')}",
                 on_change=_copy, args=("_miss_pick", "customer"),
                 help=f"Customers the model got wrong: scored {bands[-1].name} ({bands[-1].start:g} and above) but "
                      f"{stayed}, or {bands[0].name} (below {bands[1].start:g}) but {churned}; the risk bands of the "
                      f"verdict, at most {analyst_words.MISSES} of each, most wrong first.")


def baseline_ui(bundle) -> Baseline:
    """Baseline: every kind; the customer, cohort, blur width or K when the kind needs one."""
    ss = st.session_state
    kinds = [k for k in options.KINDS if k != "cohort" or bundle.labels is not None]
    st.selectbox("Compared with", kinds, key="baseline_kind", format_func=options.BASELINE_LABELS.get,
                 help="Every explanation splits the difference between this customer's score and the score of "
                      "who they are compared with. The average customer is the usual choice.")
    kind = ss["baseline_kind"]
    if kind == "customer":
        ss.setdefault("baseline_customer", str(bundle.ids[0]))
        st.selectbox("Baseline customer", bundle.ids.tolist(), key="baseline_customer")
    elif kind == "cohort":
        counts, positive = labels.counts(bundle), labels.positive(bundle)
        ss.setdefault("baseline_cohort", next(iter(counts)))
        st.selectbox(f"Cohort: customers whose {show.md(bundle.label_name)} is", list(counts), key="baseline_cohort",
                     format_func=lambda v: f"{v} ({counts[v]} customers{', positive' if v == positive else ''})")
    elif kind == "blur":
        ss.setdefault("blur_width", DEFAULT_BLUR_WIDTH)
        st.select_slider("Blur width (periods)", options.BLUR_WIDTHS, key="blur_width")
    elif kind == "sample":
        ss.setdefault("sample_k", DEFAULT_SAMPLES)
        st.select_slider("K sampled customers", options.SAMPLE_KS, key="sample_k")
    elif kind == "previous":
        ss.setdefault("previous_k", 1)
        st.select_slider(f"{periods_words(bundle).units.capitalize()} back",
                         [k for k in options.PREVIOUS_KS if k < bundle.n_periods] or [1], key="previous_k",
                         help="The customer as they were this many periods earlier: the effects add up to the change "
                              "of the score since then.")
    return _baseline()


def steps_ui() -> str:
    st.select_slider("Steps (gradient evaluations; more = more exact)", options.STEP_OPTIONS, key="steps",
                     help="'auto' places the evaluations where the prediction changes along the path, until the "
                          "attributions add up (within 0.5 %).")
    return st.session_state["steps"]


def technical_view() -> bool:
    """Whether the IG settings are open: pages then also say the rule, steps, path and space in their captions
    (closed, the main area speaks the analyst's words only)."""
    return bool(st.session_state.get("ig_settings_open"))


def compared_with(settings) -> str:
    """Who customers are compared with, in words; with the steps and rule while the IG settings are open."""
    words = options.BASELINE_LABELS.get(settings.baseline.kind, str(settings.baseline))
    return words + (f" · {settings.steps} steps ({settings.method})" if technical_view() else "")


def _ig_settings_changed() -> bool:
    """A link or a session that set any IG setting away from its default opens the section, so the view it set
    is seen."""
    ss, default = st.session_state, Settings()
    return (ss.get("steps") != str(default.steps) or ss.get("method") != default.method
            or ss.get("space") != default.space or ss.get("path") != default.path)


def advanced_ui(bundle) -> None:
    """Steps, integration rule, target, space and path: the engineers' settings, in a closed section by default."""
    box = st.expander("Advanced (IG settings)", expanded=_ig_settings_changed(), key="ig_settings",
                      on_change="rerun", icon=":material/tune:")
    st.session_state["ig_settings_open"] = box.open
    with box:  # always drawn (closed too): the widgets keep their values and the URL keeps them
        steps_ui()
        st.selectbox("Integration rule", options.METHODS, key="method")
        st.selectbox("Target (output explained)", bundle.output_names, key="target")
        st.radio("Space", options.SPACES, key="space", format_func=options.SPACE_LABELS.get, horizontal=True)
        st.radio("Path", options.PATHS, key="path", format_func=options.PATH_LABELS.get)
        input_views.categorical_ui(bundle)


def sidebar_ui(bundle) -> Choice:
    """All shared pickers, in the sidebar; also writes the settings into the URL."""
    init_state(bundle)
    with st.sidebar:
        for warning in st.session_state.get("param_warnings", []):
            st.warning(show.md(warning))
        customer_ui(bundle)
        st.divider()
        baseline_ui(bundle)
        advanced_ui(bundle)
    link = _link(bundle)
    url.write(url.encode(link, bundle.output_names))
    return Choice(customer=link.customer, settings=link.settings)


# ----------------------------------------------------------------------------- page-level pickers


def _persist(widget_key: str, key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


def compare_ui(bundle) -> Baseline:
    """The Compare page's second customer, Baseline("customer", ID), or a cohort's mean,
    Baseline("cohort", LABEL); kept across pages and in the URL."""
    ss = st.session_state
    choices = url.compare_options(bundle)
    if ss.get("_compare") not in choices:
        ss["_compare"] = url.compare_text(url.default_compare(bundle))
    ss["w_compare"] = ss["_compare"]
    target = target_name(bundle)
    scores = dict(zip(bundle.ids.tolist(), cache.predictions(bundle, target).tolist()))

    def label(option):
        other = url.parse_compare(option)
        if other.kind == "cohort":
            return f"Mean of the cohort {bundle.label_name} = {other.argument}"
        return f"{option}  ·  {target} {scores.get(option, float('nan')):.2f}"

    st.selectbox("Compare with (a customer, or the mean of a cohort)", choices, key="w_compare",
                 format_func=label, on_change=_persist, args=("w_compare", "_compare"))
    url.write({"compare": ss["_compare"]})
    return url.parse_compare(ss["_compare"])


def sample_ui() -> str:
    """How many customers the Cohort page explains."""
    ss = st.session_state
    ss.setdefault("_sample", options.SAMPLE_OPTIONS[0])
    ss["w_sample"] = ss["_sample"]
    st.segmented_control("Customers to explain (a seeded random sample, or all)", options.SAMPLE_OPTIONS,
                         key="w_sample", on_change=_persist, args=("w_sample", "_sample"))
    if ss.get("w_sample") is None:  # a segmented control can be unselected
        ss["_sample"] = ss["_sample"] or options.SAMPLE_OPTIONS[0]
    url.write({"sample": ss["_sample"]})
    return ss["_sample"]


def label_filter_ui(bundle, column) -> list[str]:
    """The label values to keep (all by default); every value when the bundle has no labels."""
    values = labels.values(bundle)
    if bundle.labels is None:
        return values
    return column.multiselect("True outcome (label)", values, default=values,
                              format_func=lambda v: f"{bundle.label_name} = {v}")

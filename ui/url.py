"""The URL codec: every setting of the dashboard lives in the query string, so a copied link
reopens the same view. :func:`decode` and :func:`encode` are plain functions;
:func:`read` and :func:`write` apply them to ``st.query_params``.

=========  ======================================================================
customer   customer id (``C00042``)
baseline   ``zero``, ``mean``, ``median``, ``customer:ID``, ``cohort:LABEL``, ``flat``,
           ``blur:WIDTH``, ``sample:K``
steps      ``8`` ... ``512`` or ``auto``
method     ``gausslegendre``, ``trapezoid``, ``left``, ``right``, ``middle``
target     output name (``churn``) or index
space      ``output`` or ``logit``
path       ``joint`` or ``per-input``
compare    Compare page: the second customer's id, or ``cohort:LABEL`` (a cohort's mean)
sample     Cohort page: ``200``, ``500``, ``1000`` or ``all``
output_period  a model with a prediction per period: the period explained, its number
           (``5``: the fifth, 1 the first) or label (``2025-05``); absent: the last
=========  ======================================================================

Each IG setting is parsed by its one parser in :mod:`explain.core.settings`; a value that does not
parse, or that the bundle or the widgets do not offer, is dropped with a warning naming it.
The page itself is the URL path (``/drivers``, ``/``, ``/compare``, ``/cohort``, ``/diagnostics``, ``/data``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from explain.core import labels
from explain.core.errors import ExplainError
from explain.core.settings import PARSERS, Baseline, Settings, resolve_target
from ui import options

WRITTEN = "_url_written"  # session state: the query parameters as this session last wrote them
SETTING_NAMES = ("baseline", "steps", "method", "target", "space", "path")
IGNORED = "Ignored the link's {name}={value!r}: expected {expected}."
EXPECTED = {
    "customer": "a customer id of this bundle",
    "baseline": "zero, mean, median, customer:ID, cohort:LABEL, flat, blur:WIDTH (one of "
                f"{', '.join(map(str, options.BLUR_WIDTHS))}), sample:K "
                f"(one of {', '.join(map(str, options.SAMPLE_KS))}) or previous:K "
                f"(one of {', '.join(map(str, options.PREVIOUS_KS))})",
    "steps": "one of " + ", ".join(options.STEP_OPTIONS),
    "method": "one of " + ", ".join(options.METHODS),
    "space": "one of " + ", ".join(options.SPACES),
    "path": "one of " + ", ".join(options.PATHS),
    "sample": "one of " + ", ".join(options.SAMPLE_OPTIONS),
    "compare": "a customer id or cohort:LABEL",
}


@dataclass(frozen=True)
class Link:
    """Everything a link holds: the sidebar's customer and IG settings (target resolved to an
    index), the Compare page's second customer or cohort, the Cohort page's sample size."""

    customer: str
    settings: Settings
    compare: Baseline  # Baseline("customer", ID) or Baseline("cohort", LABEL)
    sample: str = options.SAMPLE_OPTIONS[0]


# ----------------------------------------------------------------------------- the compare value


def parse_compare(text: str) -> Baseline:
    """'cohort:0' -> Baseline('cohort', '0'); any other text is a customer id."""
    kind, _, arg = str(text).partition(":")
    return Baseline("cohort", arg) if kind == "cohort" and arg else Baseline("customer", str(text))


def compare_text(compare: Baseline) -> str:
    return f"cohort:{compare.argument}" if compare.kind == "cohort" else str(compare.argument)


def compare_options(bundle) -> list[str]:
    return [f"cohort:{v}" for v in labels.values(bundle)] + bundle.ids.tolist()


def default_compare(bundle) -> Baseline:
    values = labels.values(bundle)
    return (Baseline("cohort", values[0]) if values
            else Baseline("customer", str(bundle.ids[min(1, bundle.n_customers - 1)])))


# ----------------------------------------------------------------------------- checks against the bundle


def check_baseline(baseline: Baseline, bundle) -> Baseline:
    """``baseline`` as the sidebar would hold it (blur with its width); ``ValueError`` if the
    bundle or the widgets do not offer it."""
    if baseline.kind == "customer" and baseline.argument not in set(bundle.ids.tolist()):
        raise ValueError("unknown customer")
    if baseline.kind == "cohort" and baseline.argument not in labels.values(bundle):
        raise ValueError("unknown label")
    if baseline.kind == "blur":
        if baseline.width not in options.BLUR_WIDTHS:
            raise ValueError("width")
        return Baseline("blur", baseline.width)
    if baseline.kind == "sample" and baseline.argument not in options.SAMPLE_KS:
        raise ValueError("k")
    if baseline.kind == "bundle":  # a folder on the server: never named by a link
        raise ValueError("snapshot")
    if baseline.kind == "previous" and not (baseline.periods_back in options.PREVIOUS_KS
                                            and baseline.periods_back < bundle.n_periods):
        raise ValueError("periods back")
    return baseline


def _setting(name: str, text: str, bundle):
    """One IG setting from its text (its one parser), checked against the bundle and the widgets."""
    value = PARSERS[name](text)
    if name == "baseline":
        return check_baseline(value, bundle)
    if name == "steps" and str(value) not in options.STEP_OPTIONS:
        raise ValueError("not offered")
    if name == "target":
        return resolve_target(value, len(bundle.output_names), bundle.output_names)
    return value


# ----------------------------------------------------------------------------- the codec


def decode(params: dict, bundle, default_customer: str) -> tuple[Link, list[str]]:
    """The link in ``params`` ({name: text}) for ``bundle``, and a warning for each value dropped."""
    warnings = []

    def bad(name, value, expected=None):
        warnings.append(IGNORED.format(name=name, value=value, expected=expected or EXPECTED[name]))

    customer = params.get("customer")
    if customer is not None and customer not in set(bundle.ids.tolist()):
        bad("customer", customer)
        customer = None
    values = {}
    for name in SETTING_NAMES:
        text = params.get(name)
        if text is None:
            continue
        try:
            values[name] = _setting(name, text, bundle)
        except (ExplainError, ValueError):
            bad(name, text, "one of " + ", ".join(bundle.output_names) if name == "target" else None)
    settings = replace(Settings(), **values).for_bundle(bundle)  # no target in the link: the bundle's
    sample = params.get("sample")
    if sample is not None and sample not in options.SAMPLE_OPTIONS:
        bad("sample", sample)
        sample = None
    compare = params.get("compare")
    if compare is not None and compare not in compare_options(bundle):
        bad("compare", compare)
        compare = None
    link = Link(customer=customer or default_customer, settings=settings,
                compare=parse_compare(compare) if compare else default_compare(bundle),
                sample=sample or options.SAMPLE_OPTIONS[0])
    return link, warnings


def encode(link: Link, output_names) -> dict[str, str]:
    """The query parameters of ``link`` (the target by its output name)."""
    strings = link.settings.to_strings()
    return {"customer": link.customer, **{name: strings[name] for name in SETTING_NAMES},
            "target": link.settings.target_name(output_names), "compare": compare_text(link.compare),
            "sample": link.sample}


# ----------------------------------------------------------------------------- the browser's URL


def read(bundle, default_customer: str) -> tuple[Link, list[str]]:
    return decode(st.query_params.to_dict(), bundle, default_customer)


def write(values: dict) -> None:
    """Write ``values`` into the URL, touching only the keys that changed, in one message (so a
    change is one browser history entry), and remember the URL as written (see :func:`moved`)."""
    current = st.query_params.to_dict()
    for key in [k for k, v in values.items() if v is None and k in current]:
        del st.query_params[key]
    changed = {key: str(value) for key, value in values.items()
               if value is not None and current.get(key) != str(value)}
    if changed:
        st.query_params.update(changed)
    st.session_state[WRITTEN] = st.query_params.to_dict()


def output_period(bundle) -> int | None:
    """The link's ``output_period`` as a period number (1 = first), checked against the bundle (its one parser,
    ``Settings.for_bundle``); None when absent or when the bundle does not take it (then it is dropped)."""
    text = st.query_params.get("output_period")
    if not text:
        return None
    try:
        return Settings.from_strings({"output_period": text}).for_bundle(bundle).output_period
    except ExplainError:
        del st.query_params["output_period"]
        return None


def with_customer(customer: str) -> dict[str, str]:
    """The query parameters of this view with another customer: a link that opens ``customer``
    with every other setting as it is (what a page links to the Customer page with)."""
    return {**st.query_params.to_dict(), "customer": str(customer)}


def moved() -> bool:
    """True when the URL is not the one this session last wrote: the browser's Back or Forward
    (Streamlit pushes a history entry for each change and reruns with the old URL on Back)."""
    written = st.session_state.get(WRITTEN)
    current = st.query_params.to_dict()
    # a rerun without a query string (one the server requests, not the browser) says nothing
    # about the URL: the widgets keep their values
    return written is not None and bool(current) and current != written

"""The What drives churn page's parts: the store it reads (or the job computing it, or the command
that would), its pickers, the sentences and the segment cards. The numbers come from
``explain.drivers`` (``ui.cache.drivers`` keeps them, with the charts drawn from them by ``explain.plots.drivers``).
The bundle's stores are listed once per run (``explain.batch.stores.stores_of``): the store read, the earlier
stores and the words about the others all come from that listing; so do the runs of "Drivers over runs"
(``explain.batch.drivers.over_runs``, drawn by ``explain.plots.over_runs``) and the store of the baseline
``previous`` that "Biggest movers" reads (``explain.batch.drivers.movers``); both keep their numbers next to the
stores, so a rerun reads a few small files.

Session state: ``_drivers_window`` ("whole" or "recent"), ``_drivers_against`` (an earlier
store's folder name or "none"), ``_drivers_feature`` (the dependence plot's feature),
``_drivers_grouped`` (groups of related features as one row).
"""

from __future__ import annotations

from functools import cached_property

import streamlit as st

from explain.analysis.drivers import profile_sentence, reason_text
from explain.batch import drivers as batch_drivers
from explain.batch.format import store_settings
from explain.batch.store import Store, settings_words
from explain.batch.stores import BundleStores, stores_of
from explain.core.errors import ExplainError
from explain.core.text import examples
from explain.plots import over_runs as over_runs_plots
from ui import cache, show, speed, stores, url

COMPUTING = ("Computing the attributions of all {total:,} customers once, in the background ({settings}); this "
             "page draws as soon as they are stored. Other pages work meanwhile.")
QUEUED = "Waiting for another store the dashboard computes to finish; this one starts next."
FAILED = "Computing the store failed: {error}"
TOO_LARGE = ("This bundle has no finished store of every customer's attributions with these settings ({settings}), "
             "and at {rows:,} rows it is too large for the dashboard to compute one while you wait (the limit is "
             "{limit:,}). Compute it with:")
NOT_WRITABLE = ("This bundle has no finished store of every customer's attributions with these settings "
                "({settings}), and no folder the dashboard can write it to. Compute it with:")
NO_FOLDER = ("This bundle was uploaded or made in Python without a folder, so no store of every customer can be "
             "found for it. Open it from a folder (streamlit run app.py -- --bundle DIR) after computing one with "
             "python -m explain batch.")
FROM_STORE = ("Read from the store {name} (finished {finished} UTC): {n:,} customers, {settings}{checked}; "
              "no model call.")
MOST_EXACT = "The most exact of {count} finished stores with this baseline, target and path (also: {stores})."
NOT_USED = "Not used: {count} store(s) of this bundle made with another baseline, target or path ({stores})."
NO_EARLIER = "none (no drift)"
GROUP_TOGGLE = "Group related features"
MIN_RUNS = 3  # stores of one settings and layout from which "Drivers over runs" draws
FEW_RUNS = ("This bundle's store folders hold {count} finished store(s) of these settings and layout; with {least} or "
            "more (one per run: `python -m explain batch --bundle {bundle} --out {folder}/<month>` each month) this "
            "section draws each feature's share of the effect over the runs, as `python -m explain drivers --bundle "
            "{bundle} --over-all --out drivers.html` writes it.")
NO_PREVIOUS = ("No store of this bundle was computed with the baseline previous (each customer one period earlier), "
               "so there is no change to list; this command computes one:")
MOVERS_SHOWN = 20


_FINISHED: dict = {}  # (bundle content hash, the store folders' marks): its finished stores of every customer
_FINISHED_KEPT = 8


class _Listed(BundleStores):
    """The bundle's stores with their finished stores of every customer (any settings) found once, and again only
    when a file of the store folders changes (``BundleStores.mark``: one stat per file): the page asks three
    times a run (the store read, the others in words, the movers' store), and each asks for a digest of every
    customer id (0.5 to 1.5 s for 1,000,000 customers)."""

    @cached_property
    def _of_every_customer(self) -> tuple[Store, ...]:
        key = (getattr(self.bundle, "content_hash", None), self.mark())
        found = _FINISHED.get(key)
        if found is None:
            found = tuple(BundleStores.finished(self))
            if len(_FINISHED) >= _FINISHED_KEPT:
                _FINISHED.clear()
            _FINISHED[key] = found
        return found

    def finished(self, *, ids=None, request=None) -> list[Store]:
        if ids is None and request is None:
            return list(self._of_every_customer)
        return super().finished(ids=ids, request=request)


def store_ui(bundle, settings) -> tuple[BundleStores, Store | None]:
    """(the bundle's stores, listed once for this run; the most exact finished store of every customer with
    the baseline, target, space and path of ``settings``, any steps: ``BundleStores.best``). No such store:
    None, after showing the background job's progress (adaptive steps; it reruns the page when the store is
    there), its error, or the command that computes the store."""
    listed = stores_of(bundle)  # uploads too: $EXPLAIN_STORES
    found = _Listed(listed.bundle, listed.dirs)
    store = found.best(settings)
    if store is None:
        _missing(bundle, settings)
    return found, store


def _missing(bundle, settings) -> None:
    """Why there is no store, and what is being done about it."""
    if bundle.path is None or not bundle.content_hash:
        st.info(show.md(NO_FOLDER), icon=":material/database:")
        return
    settings = stores.background(settings)  # computed here: adaptive steps, every customer within the tolerance
    described = settings_words(store_settings(settings, bundle), bundle.output_names)
    job = stores.start(bundle, settings)
    if job is None:
        text = (TOO_LARGE.format(settings=described, rows=stores.rows(bundle), limit=stores.AUTO_LIMIT)
                if not stores.automatic(bundle) else NOT_WRITABLE.format(settings=described))
        st.info(show.md(text), icon=":material/database:")
        st.code(show.plain(stores.command(bundle, settings)), language="bash")
        return
    if job.state == "failed":
        st.error(show.md(FAILED.format(error=job.error)), icon=":material/error:")
        st.button("Try again", icon=":material/refresh:", on_click=stores.forget, args=(bundle, settings))
        return
    st.info(show.md(COMPUTING.format(total=job.total, settings=described)), icon=":material/hourglass_top:")
    _progress(bundle, settings)


@st.fragment(run_every=1.0)
def _progress(bundle, settings) -> None:
    """The background job's progress (``settings``: the job's, adaptive steps); the page reruns when it ends."""
    job = stores.job(bundle, settings)
    if job is None:
        return
    if job.state in ("finished", "failed"):
        st.rerun()  # the whole page: it reads the store, or says why there is none
    text = QUEUED if job.state == "queued" else f"{job.done:,} of {job.total:,} customers explained"
    st.progress(job.fraction, text=text)


def source_ui(bundle, settings, found: BundleStores, store: Store) -> None:
    """Which store the page reads, in words: its name, when it was finished, its customers and settings
    and how many add up within the tolerance; the other stores of the bundle and why they are not used."""
    st.caption(show.md(source_words(bundle, settings, found, store)))


def source_words(bundle, settings, found: BundleStores, chosen: Store) -> str:
    """:func:`source_ui`'s text."""
    names = bundle.output_names
    outside = chosen.outside_tolerance
    if outside is None:
        checked = ""
    elif outside == 0:
        checked = "; every customer's effects add up to their score within the tolerance"
    else:
        checked = f"; {outside:,} of {chosen.n_customers:,} customers' effects do not add up within the tolerance"
    text = FROM_STORE.format(name=chosen.path.name, finished=chosen.completed.replace("T", " ")[:16],
                             n=chosen.n_customers, settings=settings_words(chosen.settings, names),
                             checked=checked)
    less, other = found.others(settings, chosen)
    if less:
        text += " " + MOST_EXACT.format(count=len(less) + 1, stores=examples(
            [f"{s.path.name}: {settings_words(s.settings, names)}" for s in less], quote=False))
    if other:
        text += " " + NOT_USED.format(count=len(other), stores=examples(
            [f"{s.path.name}: {settings_words(s.settings, names)}" for s in other], quote=False))
    return text


def window_ui(bundle) -> int | None:
    """Temporal features summed over the whole history (None) or its last few periods."""
    recent = max(1, bundle.n_periods // 4)
    choices = {"whole": "the whole history", "recent": f"the last {recent} periods"}
    ss = st.session_state
    ss.setdefault("_drivers_window", "whole")
    ss["w_drivers_window"] = ss["_drivers_window"]
    st.segmented_control("Temporal features summed over", list(choices), format_func=choices.get,
                         key="w_drivers_window", on_change=_keep, args=("w_drivers_window", "_drivers_window"))
    return None if ss["_drivers_window"] == "whole" else recent


def _keep(widget: str, key: str) -> None:
    if st.session_state.get(widget) is not None:  # a segmented control can be unselected
        st.session_state[key] = st.session_state[widget]


def against_ui(found: BundleStores, store: Store) -> Store | None:
    """An earlier store to measure drift against (the newest by default), or None."""
    earlier = dict(stores.earlier(found, store))
    if not earlier:
        return None
    choices = [NO_EARLIER, *earlier]
    ss = st.session_state
    if ss.get("_drivers_against") not in choices:  # the default: the newest (stores.default_against)
        ss["_drivers_against"] = choices[1]
    ss["w_drivers_against"] = ss["_drivers_against"]
    st.selectbox("Drift: compare with an earlier store of the same settings", choices, key="w_drivers_against",
                 on_change=_keep, args=("w_drivers_against", "_drivers_against"))
    return earlier.get(ss["_drivers_against"])


def group_ui(d) -> bool:
    """"Group related features": on by default when the result has groups (declared in bundle.json
    or found from the data); False without groups (no toggle)."""
    if not d.groups:
        return False
    ss = st.session_state
    ss.setdefault("_drivers_grouped", True)
    ss["w_drivers_grouped"] = ss["_drivers_grouped"]
    st.toggle(GROUP_TOGGLE, key="w_drivers_grouped", on_change=_keep, args=("w_drivers_grouped", "_drivers_grouped"),
              help="Features that carry one signal shown as one row: their attributions added up (exact). "
                   "The members are listed below the ranking.")
    return bool(ss["_drivers_grouped"])


def groups_ui(d) -> None:
    """The groups' members, one click away: each group, how it was made, its share and its members'."""
    if not d.groups:
        return
    shares = {r.feature: r.share for r in d.ranking}
    with st.expander(f"Groups of related features ({len(d.groups)})", icon=":material/workspaces:"):
        for g in d.groups:
            members = ", ".join(f"{f.label} ({shares[f]:.0%})" for f in g.members)
            st.markdown(show.md(f"**{g.name}** ({g.how}): {g.share:.0%} of all attribution together; {members}"))


def words(d, grouped: bool = False) -> None:
    """The result in words, first: the ranking (at group level when ``grouped``), the time profile,
    the drift (where it came from: :func:`source_ui`)."""
    st.info(show.md(d.words(grouped)), icon=":material/summarize:")
    for profile in d.time_profiles:
        st.markdown(show.md(profile_sentence(profile)))
    if d.drift is not None:
        st.markdown(show.md(d.drift.sentence))


def segment_cards(d, per_row: int = 3) -> None:
    """One card per churn-reason segment (highest risk first): its name, size, risk, churn rate,
    its main effects in the user's units (what raises its risk apart from what lowers it), and a
    link that opens its highest-risk customer on the Customer page."""
    for start in range(0, len(d.segments), per_row):
        columns = st.columns(per_row)
        for column, segment in zip(columns, d.segments[start:start + per_row]):
            with column.container(border=True):
                st.markdown(f"**{show.md(segment.name)}**")
                churn = "" if segment.churn_rate is None else f" · churn rate {segment.churn_rate:.0%}"
                st.caption(show.md(f"{segment.size:,} customers ({segment.share:.0%}) · mean predicted risk "
                                   f"{segment.mean_prediction:.2f}{churn}"))
                for heading, kept in (("Raises its risk", True), ("Lowers its risk", False)):
                    shown = [reason_text(x) for x in segment.drivers if x.raises == kept]
                    if shown:
                        st.markdown(f"{heading}:\n" + "\n".join("- " + show.md(text) for text in shown))
                st.page_link("pages/customer.py", label=f"Highest risk: {show.md(segment.highest_risk)}",
                             icon=":material/person_search:", query_params=url.with_customer(segment.highest_risk),
                             help="Open this segment's highest-risk customer on the Customer page")


def feature_ui(d) -> str:
    """The feature of the dependence plot (default: the top of the ranking)."""
    names = [r.feature.name for r in d.ranking]
    labels = {r.feature.name: r.feature.label for r in d.ranking}
    ss = st.session_state
    if ss.get("_drivers_feature") not in names:
        ss["_drivers_feature"] = names[0]
    ss["w_drivers_feature"] = ss["_drivers_feature"]
    st.selectbox("Feature", names, key="w_drivers_feature", format_func=labels.get, on_change=_keep,
                 args=("w_drivers_feature", "_drivers_feature"))
    return ss["_drivers_feature"]


def chart(view: cache.DriversView, name: str, build, *args) -> object:
    """The figure ``build(view.result, *args)`` (``explain.plots.drivers``), made once per result and
    arguments and kept ready to send with the result (``ui.cache.DriversView``), so that a rerun or
    another visitor only sends it."""
    if not speed.enabled():
        return build(view.result, *args)
    return view.figure(name, build, *args)


def result(bundle, store: Store, window, against: Store | None) -> cache.DriversView:
    """``ui.cache.drivers`` of the store; an unusable earlier store is left out with a warning."""
    try:
        return cache.drivers(bundle, store, window, against)
    except ExplainError as error:
        if against is None:
            raise
        st.warning(show.md(f"The earlier store cannot be compared with this one: {error}"), icon=":material/warning:")
        return cache.drivers(bundle, store, window, None)


def over_runs_ui(bundle, found: BundleStores, store: Store, d, grouped: bool) -> None:
    """"Drivers over runs": with ``MIN_RUNS`` or more finished stores of ``store``'s settings and layout
    (``BundleStores.runs``), the words, then each feature's share per run with its interval; else the command."""
    st.subheader("Drivers over runs")
    runs = found.runs(store)
    if len(runs) < MIN_RUNS:
        folder = found.dirs[0] if found.dirs else "DIR/attributions"
        st.caption(show.md(FEW_RUNS.format(count=len(runs), least=MIN_RUNS, bundle=bundle.path or "DIR",
                                           folder=folder)))
        return
    try:
        with st.spinner(f"Reading the {len(runs)} runs' stores (once: kept next to each store)..."):
            series = batch_drivers.over_runs(bundle, [s for _, s in runs], window=d.window,
                                             groups=[(g.name, g.columns) for g in d.groups])
    except ExplainError as error:
        st.warning(show.md(f"The runs cannot be compared: {error}"), icon=":material/warning:")
        return
    st.markdown(show.md(series.sentence))
    show.plot(over_runs_plots.shares(series, grouped=grouped and bool(d.groups)), key="drivers_over_runs")


def movers_ui(bundle, found: BundleStores) -> None:
    """"Biggest movers since the previous period": from the bundle's store of the baseline previous
    (``BundleStores.changes``), the words, then the table (each id opens the Customer page); else the command."""
    st.subheader("Biggest movers since the previous period")
    changes = found.changes()
    if not changes:
        folder = found.dirs[0] if found.dirs else "DIR/attributions"
        st.caption(show.md(NO_PREVIOUS))
        st.code(show.plain(f"python -m explain batch --bundle {bundle.path or 'DIR'} --baseline previous "
                           f"--out {folder}/previous"), language="bash")
        return
    try:
        result = batch_drivers.movers(bundle, changes[0], n=MOVERS_SHOWN)
    except ExplainError as error:
        st.warning(show.md(f"The movers cannot be listed: {error}"), icon=":material/warning:")
        return
    st.markdown(show.md(result.sentence))
    if result.rows:
        movers_table(result)


def movers_table(result) -> None:
    """One row per mover: its id (a link to the Customer page), risk then, risk now, the rise, its first reason."""
    widths = (2, 1, 1, 1, 4)
    for column, heading in zip(st.columns(widths), ("Customer", "Risk then", "Risk now", "Rise", "First reason")):
        column.markdown(f"**{heading}**")
    for m in result.rows:
        cells = st.columns(widths)
        cells[0].page_link("pages/customer.py", label=show.md(m.customer), icon=":material/person_search:",
                           query_params=url.with_customer(m.customer), help="Open this customer on the Customer page")
        for cell, text in zip(cells[1:], (f"{m.then:.2f}", f"{m.now:.2f}", f"{m.rise:+.2f}", show.md(m.reason))):
            cell.markdown(text)

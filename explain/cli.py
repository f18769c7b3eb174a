"""``python -m explain ...``: the engine from the command line (the same functions, no other logic).

Exit codes: 0 success; 1 ``check`` found problems; 2 bad input or settings (the message
says what and how to fix it; never a traceback).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from explain.core.errors import ExplainError  # noqa: E402
from explain.core.quadrature import METHODS  # noqa: E402
from explain.core.settings import DEFAULT_MAX_POINTS, DEFAULT_TOLERANCE, PARSERS, Settings  # noqa: E402
from explain.core.text import one_line  # noqa: E402
from explain.modelfile.config import TRUST_CODE_HINT, custom_code_refused  # noqa: E402

CUSTOMERS_FILE_MISSING = "The customers file {path} does not exist (--customers-file: one customer id per line)."
CUSTOMERS_FILE_UNREADABLE = "The customers file {path} cannot be read as UTF-8 text ({why})."
BASELINE_AND_SNAPSHOT = (
    "--baseline {baseline} and --baseline-bundle both name a baseline: give one (--baseline-bundle DIR compares each "
    "customer with its row in that earlier export)."
)
TRUST_LOCAL_ONLY = ("--trust-code works with --engine local only (Ray workers do not import it). To fix: drop "
                    "--engine ray, or convert the custom layers to built-in Keras layers.")
DRIVERS_SUFFIX = "--out {path} must end in .json or .html: the suffix picks the format."
CHECK_CUSTOMERS = 8  # customers the model checks run on (the first ones of the static table)
LIMIT_HELP = ("raise (or lower) one of the size limits a bundle's files are checked against before they are read, "
              "for files you trust: max_table_cells, max_table_bytes, max_layers, max_params, max_json_bytes ... "
              "(explain/modelfile/limits.py; repeat for several)")
TRUST_HELP = ("a Python file defining your own custom Keras layers (it is imported and runs): for your own "
              "model on your own machine only")
TRUST_MODEL_HELP = ("open the bundle's TensorFlow SavedModel (savedmodel/): a TensorFlow program, whose graph can "
                    "read and write files; only for a model you trust (TensorFlow backend only)")
TRUST_MODEL_LOCAL_ONLY = ("--trust-model works with --engine local only (Ray workers open the bundle without it). "
                          "To fix: drop --engine ray, or save the model with Keras 3 as model.keras.")

_CHECKOUT = Path(__file__).resolve().parent.parent
# In a source checkout the repository's bundles/demo; in an installed package ./bundles/demo
# (never a folder inside site-packages).
DEFAULT_DEMO_DIR = (_CHECKOUT if (_CHECKOUT / "app.py").is_file() else Path()) / "bundles" / "demo"


def _settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The IG settings, as text: ``settings_from_args`` parses them (``Settings.from_strings``)."""
    parser.add_argument("--baseline", default="mean",
                        help="zero | mean | median | customer:ID | cohort:LABEL | flat | blur[:WIDTH] | sample:K | "
                             "previous[:K] (the customer K periods earlier: why the score changed since then) "
                             "(default: mean)")
    parser.add_argument("--steps", default="64", help="gradient evaluations per customer, or 'auto' (default 64)")
    parser.add_argument("--method", default="gausslegendre", help=f"integration rule: {' | '.join(METHODS)}")
    parser.add_argument("--target", default=None,
                        help="output column: index or output name (default: the bundle's target: bundle.json "
                             "'target', else the positive_label class, else output 0)")
    parser.add_argument("--space", default="output",
                        help="output | logit: explain the output (probability) or its logit / log-odds")
    parser.add_argument("--path", default="joint",
                        help="joint: both inputs move together (default); per-input: one at a time")
    parser.add_argument("--tolerance", default=str(DEFAULT_TOLERANCE),
                        help="with --steps auto: largest |delta| as a fraction of |f(x) - f(b)| "
                             f"(default {DEFAULT_TOLERANCE})")
    parser.add_argument("--max-points", dest="max_points", default=str(DEFAULT_MAX_POINTS),
                        help="with --steps auto: the most gradient evaluations per customer and baseline "
                             f"(default {DEFAULT_MAX_POINTS}); customers still outside the tolerance are counted")
    parser.add_argument("--seed", default="0", help="seed of sample:K baselines")
    parser.add_argument("--categorical", default="mode",
                        help="baseline of categorical inputs (ids into an Embedding): mode | mean-embedding | "
                             "category:FEATURE=VALUE;... (default: mode, the most frequent category)")
    parser.add_argument("--output", default=None, metavar="NAME",
                        help="a model with several outputs (heads): the one to explain, by name (default: bundle.json "
                             "'output', else the first)")
    parser.add_argument("--output-period", dest="output_period", default=None, metavar="LABEL|NUMBER",
                        help="a model with a prediction per period (None, T, K): the period to explain, by its label "
                             "(2025-05) or its number, 1 the first and T the last (default: the last period)")


def _snapshot_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline-bundle", metavar="DIR",
                        help="an earlier export of the same customers (a bundle folder, matched by customer id) as "
                             "the baseline: the attributions add up to the change of each score since then, static "
                             "features included (instead of --baseline; opened with --trust-code and --limit too)")


def _login_arguments(serve: argparse.ArgumentParser) -> None:
    """``explain serve``'s login: OpenID Connect through Streamlit's st.login, with an allow-list."""
    login = serve.add_argument_group("login (OpenID Connect)")
    login.add_argument("--auth", choices=("oidc",), help="oidc: every page behind a login at your identity provider "
                       "(allows a non-loopback --address)")
    login.add_argument("--oidc-metadata", metavar="URL",
                       help="the provider's discovery document (https://.../.well-known/openid-configuration)")
    login.add_argument("--client-id", help="this app's client id at the provider")
    login.add_argument("--client-secret", help="its client secret (or set $EXPLAIN_OIDC_CLIENT_SECRET, which "
                       "other users of this machine cannot read in the process list)")
    login.add_argument("--allow", action="append", metavar="EMAIL_OR_@DOMAIN",
                       help="who may see the dashboard: an e-mail address or @domain (repeat for several)")
    login.add_argument("--redirect-uri", metavar="URL", help="the URL users reach plus /oauth2callback, registered "
                       "at the provider (default http://localhost:PORT/oauth2callback)")


def _limit_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", action="append", metavar="FIELD=VALUE", help=LIMIT_HELP)


def _bundle_command(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand that opens a bundle: ``--bundle``, ``--trust-code`` and ``--limit``."""
    command = sub.add_parser(name, help=help)
    command.add_argument("--bundle", required=True)
    command.add_argument("--trust-code", metavar="LAYERS.py", help=TRUST_HELP)
    command.add_argument("--trust-model", action="store_true", help=TRUST_MODEL_HELP)
    _limit_argument(command)
    return command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m explain",
                                     description="Integrated Gradients for static + temporal Keras models.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="write the demo churn bundle (deterministic)")
    demo.add_argument("--out", default=str(DEFAULT_DEMO_DIR), help=f"folder (default {DEFAULT_DEMO_DIR})")

    _bundle_command(sub, "check", "validate a bundle; list every problem; exit 1 if any")
    _explain_commands(sub)
    _summary_commands(sub)
    convert = _bundle_command(sub, "convert", "write a bundle in the other layout: .npy histories (arrays) or long "
                                             "temporal tables (long)")
    convert.add_argument("--out", required=True, help="the new bundle folder (must not exist or be empty)")
    convert.add_argument("--layout", choices=("arrays", "long"), default="arrays", help="default: arrays")
    _compare_command(sub)
    _serve_command(sub)
    return parser


def _compare_command(sub) -> None:
    """``compare-models``: the bundle's model (the champion) against a challenger model file."""
    compare = _bundle_command(sub, "compare-models", "the bundle's model against a challenger: scores, disagreements, "
                                                     "agreement of the rankings, what changed; JSON or HTML")
    compare.add_argument("--challenger", required=True, metavar="MODEL",
                         help="the challenger's model file (.keras or .h5), taking the bundle model's inputs; opened "
                              "by the same rules as the bundle's model (--limit, safe mode, --trust-code)")
    compare.add_argument("--customers", type=int, default=200, help="customers sampled with --seed (default 200)")
    compare.add_argument("--threshold", type=float, default=None,
                         help="the score from which a model flags a customer (default 0.5; 0 with --space logit)")
    _settings_arguments(compare)
    compare.add_argument("--batch-size", type=int, default=None, help="interpolation points per gradient call")
    compare.add_argument("--out", required=True, help="report.json | report.html")


def _explain_commands(sub) -> None:
    """``attribute`` (some customers) and ``batch`` (every customer, to a store)."""
    attribute = _bundle_command(sub, "attribute", "explain some customers; write JSON, CSV or Parquet")
    attribute.add_argument("--customer", action="append", required=True, help="customer id (repeat for several)")
    _settings_arguments(attribute)
    _snapshot_argument(attribute)
    attribute.add_argument("--batch-size", type=int, default=None, help="interpolation points per gradient call")
    attribute.add_argument("--out", required=True, help="FILE.json | FILE.csv | FILE.parquet")

    batch = _bundle_command(sub, "batch", "explain every customer, in resumable chunks, to Parquet")
    batch.add_argument("--out", required=True, help="output folder (a Parquet dataset) or FILE.parquet")
    batch.add_argument("--customers-file", help="a text file with one customer id per line (default: all)")
    _settings_arguments(batch)
    _snapshot_argument(batch)
    batch.add_argument("--batch-size", type=int, default=200, help="customers per chunk (default 200)")
    batch.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="local: this process (default); ray: an actor pool on a Ray cluster (optional extra)")
    batch.add_argument("--address", help="with --engine ray: the cluster (auto | ray://HOST:PORT); "
                                         "default: start a local Ray with this machine's cores")
    batch.add_argument("--workers", type=int, help="with --engine ray: actors (default: the cluster's CPUs)")


def _summary_commands(sub) -> None:
    """``drivers`` (what drives the prediction, from a batch store) and ``faithfulness`` (checks of the method)."""
    drivers = _bundle_command(sub, "drivers", "what drives the prediction across every customer of a batch store: "
                                             "ranking, segments, time profile, drift; JSON or HTML")
    drivers.add_argument("--store", help="the batch store (default: the most exact finished store of every customer, "
                                         "adaptive steps first, under BUNDLE/attributions/ or $EXPLAIN_STORES)")
    drivers.add_argument("--against", metavar="OLD_STORE", help="an earlier store of the same layout: which "
                                                                "drivers gained or lost weight since")
    drivers.add_argument("--window", type=int, help="summarise temporal features over their last N periods "
                                                    "(default: the whole history)")
    drivers.add_argument("--over", metavar="STORE", action="append", help="drivers over runs: one store per run "
                         "(give 2 or more); each feature's share per run with intervals, under drift_over_runs")
    drivers.add_argument("--over-all", action="store_true", help="drivers over runs over the store read and every "
                         "other finished store of its settings and layout in the bundle's store folders")
    drivers.add_argument("--movers", metavar="STORE", help="the biggest movers from a store of --baseline previous "
                         "(default: the store read, when it is one); under movers")
    drivers.add_argument("--output", default=None, metavar="NAME", help="a model with several outputs: the stores "
                         "of this head (default: the bundle's)")
    drivers.add_argument("--output-period", dest="output_period", default=None, metavar="LABEL|NUMBER",
                         help="a model with a prediction per period: the stores of this period, by label or number, "
                              "1 the first (default: the last)")
    drivers.add_argument("--out", required=True, help="drivers.json | drivers.html")

    faith = _bundle_command(sub, "faithfulness", "deletion/insertion curves, model randomisation, occlusion; JSON")
    _settings_arguments(faith)  # --seed also seeds the customer sample, random orders, re-initialisations
    faith.add_argument("--customers", type=int, default=200, help="customers sampled with --seed (default 200)")
    faith.add_argument("--random-orders", type=int, default=5, help="seeded random orders (default 5)")
    faith.add_argument("--repeats", type=int, default=3, help="re-initialisations per layer (default 3)")
    faith.add_argument("--batch-size", type=int, default=None, help="interpolation points per gradient call")
    faith.add_argument("--ranks", type=int, default=20, help="cells removed one at a time for CPD/CPP (default 20)")
    faith.add_argument("--noise", type=float, default=0.1, help="infidelity noise, x each feature's std (default 0.1)")
    faith.add_argument("--noise-samples", type=int, default=64, help="infidelity draws per customer (default 64)")
    faith.add_argument("--radius", type=float, default=0.01, help="sensitivity-max radius, x each input (default 0.01)")
    faith.add_argument("--radius-samples", type=int, default=16, help="sensitivity-max draws per customer (default 16)")
    faith.add_argument("--out", required=True, help="FILE.json")


def _serve_command(sub) -> None:
    """``serve``: the dashboard, its startup bundle, the address it listens on and who may sign in."""
    serve = sub.add_parser("serve", help="start the dashboard (Streamlit) on a bundle")
    serve.add_argument("--bundle", help="bundle folder (default: the demo bundle)")
    serve.add_argument("--trust-code", metavar="LAYERS.py", help=TRUST_HELP + "; never for uploads")
    serve.add_argument("--trust-model", action="store_true", help=TRUST_MODEL_HELP + "; never for uploads")
    _limit_argument(serve)
    serve.add_argument("--challenger", metavar="MODEL", help="a challenger model file taking the bundle model's "
                       "inputs: adds the engineers' Champion against challenger page (opened like the bundle's model)")
    serve.add_argument("--port", type=int, default=8501, help="TCP port (default 8501)")
    serve.add_argument("--address", default="127.0.0.1",
                       help="interface to listen on (default 127.0.0.1, this machine only; another address needs "
                            "--auth oidc or --behind-auth-proxy)")
    serve.add_argument("--behind-auth-proxy", action="store_true",
                       help="a reverse proxy that signs users in stands in front: allows a non-loopback --address")
    serve.add_argument("--upload-limit", action="append", metavar="FIELD=VALUE",
                       help="raise (or lower) one of the size limits of the files visitors upload through the page "
                            "(the same fields as --limit, which is for --bundle; repeat for several)")
    _login_arguments(serve)


def settings_from_args(args) -> Settings:
    """The ``Settings`` of the command line's options (each parsed by ``explain.core.settings``);
    ``--baseline-bundle DIR`` is the baseline ``bundle:DIR`` (the folder made absolute), opened here with the
    command's ``--trust-code`` and ``--limit``."""
    strings = {name: getattr(args, name) for name in PARSERS}
    snapshot = getattr(args, "baseline_bundle", None)
    if snapshot:
        if args.baseline != "mean":
            raise ExplainError(BASELINE_AND_SNAPSHOT.format(baseline=args.baseline))
        from explain.analysis.explainer import open_snapshot

        folder = Path(snapshot).expanduser().resolve()
        open_snapshot(folder, loader=model_loader(args), limits=limits_from_args(args))
        strings["baseline"] = f"bundle:{folder}"
    return Settings.from_strings(strings)


def read_customers_file(path, with_lines: bool = False):
    """The ids of a text file, one per line (blank lines and surrounding spaces ignored).
    With ``with_lines``: (ids, {id: first line number})."""
    from explain.batch.local import NO_CUSTOMERS

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ExplainError(CUSTOMERS_FILE_MISSING.format(path=path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ExplainError(CUSTOMERS_FILE_UNREADABLE.format(path=path, why=one_line(error))) from None
    ids, lines = [], {}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            ids.append(line.strip())
            lines.setdefault(line.strip(), number)
    if not ids:
        raise ExplainError(NO_CUSTOMERS.format(source=f"The customers file {path}"))
    return (ids, lines) if with_lines else ids


def cmd_demo(args) -> int:
    from explain.demo.churn import build_demo

    out = build_demo(args.out)
    print(f"wrote the demo bundle to {out}")
    return 0


def limits_from_args(args):
    """The ``Limits`` of the command line's ``--limit FIELD=VALUE`` options over the owner's limits
    (``OWNER_LIMITS``: the bundle is the owner's own, named on the command line)."""
    from explain.modelfile.limits import OWNER_LIMITS, parse_limits

    return parse_limits(getattr(args, "limit", None), OWNER_LIMITS)


def model_loader(args):
    """The bundle's model loader for ``--trust-code FILE`` and ``--trust-model`` (None without them: the default,
    untrusted).

    ``--trust-code``: imports FILE (``explain.modelfile.trust``), says so on stderr (the dashboard shows the same
    words as a badge) and opens the model with FILE's Keras objects. ``--trust-model``: a TensorFlow SavedModel
    folder (savedmodel/) is opened too (``explain.modelfile.savedmodel.TrustModel``). A bundle given on the
    command line only."""
    loader = None
    if getattr(args, "trust_code", None):
        from explain.modelfile import safe_load, trust

        trusted = trust.load_trusted_code(args.trust_code)
        print(trusted.badge, file=sys.stderr)
        loader = functools.partial(safe_load.open_model, trusted=trusted, limits=limits_from_args(args))
    if getattr(args, "trust_model", False):
        from explain.modelfile.savedmodel import TrustModel

        loader = TrustModel(loader, limits_from_args(args))
    return loader


def open_bundle(args):
    """The bundle of ``--bundle`` with ``--trust-code`` and ``--limit``; ``BundleError`` if it has problems."""
    from explain.bundle.load import load_bundle

    return load_bundle(args.bundle, loader=model_loader(args), limits=limits_from_args(args))


def cmd_check(args) -> int:
    from explain.bundle import load as bundle_io

    report, bundle = bundle_io.inspect_bundle(args.bundle, loader=model_loader(args), limits=limits_from_args(args))
    if bundle is not None:  # the tables and the model fit: what would make every attribution fail
        model_file = next(name for name in (bundle_io.MODEL_FILE, bundle_io.LEGACY_MODEL_FILE, bundle_io.SAVEDMODEL_DIR)
                          if (bundle.path / name).exists())
        for message in model_problems(bundle):
            report.add(model_file, message)
        from explain.core import ig

        report.notes += [f"Warning: {note}" for note in ig.model_notes(bundle.model, roles=bundle.roles or None)]
        if report.ok:
            kept_for_the_dashboard(bundle, report, model_file)
    print(report.format())
    if not report.ok and not args.trust_code and custom_code_refused(report.format()):
        print(TRUST_CODE_HINT)
    return 0 if report.ok else 1


SCORED = ("{scored} every customer ({n:,}) and looked for features that carry one signal ({groups}) in "
          "{seconds:.1f} s, both kept beside the array cache: the dashboard reads them instead of computing them "
          "again.")
SCORES_READ = "Read the scores of an earlier check of the same files for"  # in SCORED, where they were kept already
NOT_FINITE = "the model's output is not a finite number for {count:,} customer(s), e.g. {ids}: their scores and " \
             "attributions cannot be trusted. Check those customers' values (NaN, huge numbers) or the model."


def kept_for_the_dashboard(bundle, report, model_file: str) -> None:
    """A big bundle (one with an array cache: ``explain.bundle.cache``): every customer scored once and the feature
    groups found once (``explain.analysis.groups.of``), both kept for the dashboard's first page (20,000 histories of
    365 days take seconds to score); a customer whose score is not finite is a problem of the model file. Small
    bundles get both from the dashboard in well under a second."""
    import time

    import numpy as np

    from explain.analysis import cohort, groups
    from explain.bundle import cache as array_cache

    if not array_cache.holds(bundle.path, bundle.content_hash):
        return
    start = time.perf_counter()
    scores, read = cohort.kept_scores(bundle)
    bad = np.flatnonzero(~np.all(np.isfinite(scores), axis=1))
    if len(bad):
        report.add(model_file, NOT_FINITE.format(count=len(bad), ids=", ".join(map(str, bundle.ids[bad[:3]]))))
        return
    found = groups.of(bundle)
    names = f"{len(found)} group(s): " + "; ".join(g.name for g in found) if found else "none found"
    report.notes.append(SCORED.format(scored=SCORES_READ if read else "Scored", n=bundle.n_customers, groups=names,
                                      seconds=time.perf_counter() - start))
    report.notes += padding_cut(bundle, scores[:, 0])
    report.notes += compiled_for_the_dashboard(bundle)


XLA_KEPT = ("Compiled the dashboard's one-customer calls with XLA in {seconds:.1f} s ({periods} periods: a customer's "
            "attribution several times faster than without), kept in TensorFlow's cache {folder}: the dashboard reads "
            "them instead of compiling again.")


def compiled_for_the_dashboard(bundle) -> list[str]:
    """A model of long histories (``explain.core.engine.xla_wanted``): the dashboard's one-customer bucket compiled
    once, where TensorFlow keeps XLA executables on disk (``explain.core.xla.keep_compiled``, set by :func:`main`);
    a note says so. Nothing where that cache is off (the dashboard would compile it again anyway)."""
    import time

    from explain.core import xla
    from explain.core.engine import engine_for, warm_up_xla, xla_wanted

    folder = xla.kept_folder()
    if folder is None or not xla_wanted(bundle.model):
        return []
    start = time.perf_counter()
    if not warm_up_xla(bundle.model, background=False):
        return []
    return [XLA_KEPT.format(seconds=time.perf_counter() - start, periods=engine_for(bundle.model).longest_history(),
                            folder=folder)]


def padding_cut(bundle, scores) -> list[str]:
    """For a model that reads padded histories behind a Masking layer: one attribution (default settings) of the
    highest-scored customer whose history is padded at the start makes the padding cut's one check
    (``explain.core.cut``), which ``explain.bundle.load`` keeps for the dashboard; a note says what it found."""
    import numpy as np

    from explain.analysis.explainer import explain_customers
    from explain.core.engine import cut_notes, engine_for
    from explain.core.settings import Settings

    cut = engine_for(bundle.model, getattr(bundle, "roles", None) or None).cut
    if not cut.possible:
        return []
    data = bundle.data()
    padded = np.ones(len(scores), bool)
    for key, mask in cut.mask.items():  # the first period is padding: the history is padded at the start
        padded &= np.all(np.asarray(data[key][:, 0]) == mask, axis=tuple(range(1, data[key].ndim - 1)))
    if not padded.any():
        return []
    customer = str(bundle.ids[np.flatnonzero(padded)[np.argmax(scores[padded])]])
    explain_customers(bundle, [customer], Settings().for_bundle(bundle))
    return [f"Model calls on padded histories: {cut_notes(bundle.model)} (checked on customer {customer}'s "
            "attribution, kept beside the array cache for the dashboard)."]


def model_problems(bundle) -> list[str]:
    """``ig.model_problems`` on a few customers, with the zero and mean baselines built as
    ``attribute`` builds them (``explainer.baseline_for``)."""
    from explain.analysis.explainer import baseline_for
    from explain.core import ig

    data = bundle.data()
    inputs = {key: values[:CHECK_CUSTOMERS] for key, values in data.items()}
    named = {spec: baseline_for(bundle, inputs, spec) for spec in ("zero", "mean")}
    return ig.model_problems(bundle.model, inputs=inputs, baselines=named, roles=bundle.roles or None)


def cmd_attribute(args) -> int:
    from explain.analysis import report, words
    from explain.analysis.explainer import explain_customers
    from explain.bundle.heads import viewed

    bundle, settings = viewed(open_bundle(args), settings_from_args(args))  # the head and period explained
    ids = list(dict.fromkeys(args.customer))
    attribution = explain_customers(bundle, ids, settings, batch_size=args.batch_size)
    path = report.write_attributions(args.out, attribution, bundle, ids, settings)
    for note in attribution.notes:
        print(f"note: {note}")
    if settings.output is not None or settings.output_period is not None:  # several heads, a prediction per period
        print(f"explained: {settings.output or 'the output'}" + ("" if settings.output_period is None else
              f" at {bundle.periods[settings.output_period - 1]} (period {settings.output_period} of "
              f"{bundle.n_periods})"))
    for i, cid in enumerate(ids):  # the Customer page's first sentence, then how well the effects add up
        fx, fb = float(attribution.prediction[i]), float(attribution.baseline_prediction[i])
        advice = report.delta_status(float(attribution.delta[i]), fx, fb, auto=settings.steps == "auto")[1]
        print(f"{cid}: {words.story(attribution, bundle, i, cid, settings=settings).headline} {advice}")
    print(f"wrote {path}")
    return 0


def cmd_batch(args) -> int:
    from explain.batch.local import check_ids, run_batch_job
    from explain.batch.ray_job import ONLY_WITH_RAY, run_ray_batch_job

    if args.engine == "ray":
        if args.trust_code:
            raise ExplainError(TRUST_LOCAL_ONLY)
        if args.trust_model:
            raise ExplainError(TRUST_MODEL_LOCAL_ONLY)
        ids = read_customers_file(args.customers_file) if args.customers_file else None
        result = run_ray_batch_job(args.bundle, args.out, settings_from_args(args), chunk_size=args.batch_size,
                                   ids=ids, workers=args.workers, address=args.address, progress=True,
                                   limits=limits_from_args(args))
        print(result.describe())
        return 0
    for option, value in (("--address", args.address), ("--workers", args.workers)):
        if value is not None:
            raise ExplainError(ONLY_WITH_RAY.format(option=option))
    settings = settings_from_args(args)
    ids = lines = None
    if args.customers_file:
        ids, lines = read_customers_file(args.customers_file, with_lines=True)
    from explain.bundle.heads import viewed

    bundle, settings = viewed(open_bundle(args), settings)  # the head and period explained
    if ids is not None:
        ids = check_ids(bundle, ids, source=f"The customers file {args.customers_file}", lines=lines)
    result = run_batch_job(bundle, args.out, settings, chunk_size=args.batch_size, ids=ids, progress=True)
    print(result.describe())
    return 0


def cmd_drivers(args) -> int:
    import json

    from explain.analysis.drivers import profile_sentence
    from explain.batch.drivers import drivers, extras
    from explain.core.files import write_atomic
    from explain.plots.html import drivers_report

    suffix = Path(args.out).suffix.lower()
    if suffix not in (".json", ".html"):
        raise ExplainError(DRIVERS_SUFFIX.format(path=args.out))
    bundle = open_bundle(args)
    chosen = {name: getattr(args, name) for name in ("output", "output_period") if getattr(args, name) is not None}
    result = drivers(bundle, args.store, against=args.against, window=args.window,  # a head/period: its stores
                     settings=Settings.from_strings(chosen) if chosen else None)
    over_runs, movers = extras(bundle, result, over=args.over, over_all=args.over_all, movers_store=args.movers)
    document = {**result.to_dict(), **({"drift_over_runs": over_runs.to_dict()} if over_runs else {}),
                **({"movers": movers.to_dict()} if movers else {})}
    text = (json.dumps(document, indent=1) if suffix == ".json"
            else drivers_report(result, over_runs=over_runs, movers=movers))
    path = write_atomic(args.out, lambda tmp: tmp.write_text(text + "\n", encoding="utf-8"), readable=True)
    print(result.sentence)
    for profile in result.time_profiles:
        print(profile_sentence(profile))
    print(f"{len(result.segments)} segment(s): " + "; ".join(
        f"{s.name} ({s.size:,}, mean prediction {s.mean_prediction:.2f})" for s in result.segments))
    if result.drift is not None:
        print(result.drift.sentence)
    for added in (over_runs, movers):
        if added is not None:
            print(added.sentence)
    print(f"wrote {path}")
    return 0


def cmd_faithfulness(args) -> int:
    from explain.analysis import faithfulness
    from explain.bundle.heads import viewed

    faithfulness.check_out(args.out)
    bundle, settings = viewed(open_bundle(args), settings_from_args(args))  # the head and period explained
    trust = faithfulness.tm.Options(ranks=args.ranks, noise=args.noise, noise_samples=args.noise_samples,
                                    radius=args.radius, radius_samples=args.radius_samples,
                                    random_orders=args.random_orders, seed=settings.seed)
    result = faithfulness.run(bundle, settings, customers=args.customers, seed=settings.seed, trust=trust,
                              random_orders=args.random_orders, repeats=args.repeats, batch_size=args.batch_size)
    path = faithfulness.write_report(args.out, result)
    print("\n".join(faithfulness.summary_lines(result)))
    print(f"wrote {path}")
    return 0


def cmd_compare_models(args) -> int:
    import json

    from explain.analysis import models
    from explain.bundle.load import load_bundle
    from explain.core.files import write_atomic
    from explain.plots.models_html import models_report

    suffix = Path(args.out).suffix.lower()
    if suffix not in (".json", ".html"):
        raise ExplainError(DRIVERS_SUFFIX.format(path=args.out))
    settings, loader, limits = settings_from_args(args), model_loader(args), limits_from_args(args)
    bundle = load_bundle(args.bundle, loader=loader, limits=limits)
    challenger = models.open_challenger(args.challenger, loader=loader, limits=limits)  # the bundle model's rules
    result = models.compare_models(bundle, challenger, customers=args.customers, settings=settings,
                                   seed=settings.seed, threshold=args.threshold, batch_size=args.batch_size,
                                   name=str(args.challenger))
    text = json.dumps(result.to_dict(), indent=1) if suffix == ".json" else models_report(result)
    path = write_atomic(args.out, lambda tmp: tmp.write_text(text + "\n", encoding="utf-8"), readable=True)
    tau = result.kendall_tau
    print(result.sentence)
    print(f"Kendall's tau-b of the rankings: {tau.value:.3f} ({100 * models.LEVEL:.0f} % bootstrap interval "
          f"{tau.low:.3f} to {tau.high:.3f}, {models.RESAMPLES} resamples of the customers)")
    for change in [c for c in result.changed[:5] if abs(c.change) >= models.SAID_CHANGE]:
        print(f"  {change.words}")
    print(f"{len(result.disagreements)} of {len(result.customers)} customers flagged by one model only "
          f"(threshold {result.threshold:g})")
    print(f"wrote {path}")
    return 0


def cmd_convert(args) -> int:
    from explain.bundle.convert import convert_bundle

    out = convert_bundle(args.bundle, args.out, args.layout, loader=model_loader(args), limits=limits_from_args(args))
    print(f"wrote the {args.layout} layout of {args.bundle} to {out}")
    return 0


def cmd_serve(args) -> int:
    from explain.modelfile.limits import UPLOAD_LIMITS, parse_limits
    from explain.serve import AUTH_ONLY, oidc_settings, serve

    login = {"--oidc-metadata": args.oidc_metadata, "--client-id": args.client_id,
             "--client-secret": args.client_secret, "--allow": args.allow, "--redirect-uri": args.redirect_uri}
    auth = None
    if args.auth == "oidc":
        auth = oidc_settings(args.oidc_metadata, args.client_id, args.client_secret, args.allow, args.redirect_uri)
    elif given := [option for option, value in login.items() if value]:
        raise ExplainError(AUTH_ONLY.format(option=given[0]))
    return serve(args.bundle, port=args.port, address=args.address, trust_code=args.trust_code,
                 trust_model=args.trust_model, limits=limits_from_args(args),
                 behind_auth_proxy=args.behind_auth_proxy, auth=auth, challenger=args.challenger,
                 upload_limits=parse_limits(args.upload_limit, UPLOAD_LIMITS, "--upload-limit"))


def main(argv=None) -> int:
    from explain.core import backend

    backend.prepare_process()  # TensorFlow without its unused optional imports, its XLA cache on disk
    args = build_parser().parse_args(argv)
    try:
        return {"demo": cmd_demo, "check": cmd_check, "attribute": cmd_attribute, "batch": cmd_batch,
                "drivers": cmd_drivers, "faithfulness": cmd_faithfulness, "convert": cmd_convert,
                "compare-models": cmd_compare_models,
                "serve": cmd_serve}[args.command](args)
    except ExplainError as error:
        print(f"error: {error}", file=sys.stderr)
        if hasattr(args, "trust_code") and not args.trust_code and custom_code_refused(str(error)):
            print(TRUST_CODE_HINT, file=sys.stderr)  # the command line only: an upload never gets this
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

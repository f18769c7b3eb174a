"""The settings of one explanation, parsed once at each edge.

``Settings`` is the one request type: the CLI, the dashboard's URL and widgets, the batch
store and the caches all build or read it. Each setting has exactly one function that
parses its string form (``PARSERS``), and ``Settings.to_strings`` writes what those
functions read back::

    settings = Settings.from_strings({"baseline": "blur:2", "steps": "auto", "target": "churn"})
    settings = settings.resolved(bundle.output_names)  # target "churn" -> 0, checked once
    settings.key()          # hashable: the caches' key and the batch store's identity
    settings.to_strings()   # {"baseline": "blur:2", "steps": "auto", "target": "0", ...}

The constructor takes typed values (``steps=64``, ``baseline=Baseline("cohort", "0")``) or
the string forms (``baseline="cohort:0"``, ``steps="64"``) and checks them: an unknown
method, space or path, steps out of range for the rule, or a bad baseline spec raise an
``AttributionError`` saying what was given and what is expected.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from explain.core.adaptive import DEFAULT_MAX_POINTS, START_POINTS
from explain.core.errors import AttributionError
from explain.core.quadrature import METHODS, alphas_and_weights

SPACES = ("output", "logit")
PATHS = ("joint", "per-input")
DEFAULT_TOLERANCE = 0.005  # of |f(x) - f(b)|, for steps="auto"
ABSOLUTE_TOLERANCE = 1e-4  # floor, for customers whose f(x) is close to f(b)
AUTO = "auto"

# Baseline kinds and their arguments.
KINDS = ("zero", "mean", "median", "customer", "cohort", "flat", "blur", "sample", "previous", "bundle")
NEEDS_ARGUMENT = ("customer", "cohort", "sample", "bundle")
NO_ARGUMENT = ("zero", "mean", "median", "flat")
DEFAULT_BLUR_WIDTH = 2.0
DEFAULT_SAMPLES = 16
MAX_SAMPLES = 256
MAX_PREVIOUS = 1000  # previous:K, K periods back

# Message templates (tests import them).
BAD_SPEC = (
    "Unknown baseline {spec!r}. Expected one of: zero, mean, median, customer:ID, "
    "cohort:LABEL, flat, blur or blur:WIDTH, sample:K, previous or previous:K (the customer K periods earlier), "
    "bundle:DIR (an earlier snapshot of the same customers)."
)
BAD_PREVIOUS = (
    "previous:K needs K, the number of periods back, as an integer from 1 to {high} (for example previous:1, "
    "last period); got {k!r}."
)
BAD_WIDTH = "Blur width {width!r} must be a positive number of periods (for example blur:2)."
BAD_SAMPLES = "sample:K needs K from 1 to {high} baselines (for example sample:16); got {k!r}."
UNKNOWN_SETTING = "{name}={value!r} is not valid; expected one of: {expected}."
BAD_STEPS_TEXT = "steps={value!r} is out of range: expected an integer (32-64 is a good start) or \"auto\"."
BAD_TOLERANCE = "tolerance={value!r} must be a positive number (a fraction of |f(x) - f(b)|)."
BAD_SEED = "seed={value!r} must be an integer (the seed of sample:K baselines)."
BAD_MAX_POINTS = (
    "max_points={value!r} must be an integer from {low} to {high}: the most gradient evaluations "
    "steps=\"auto\" spends per customer and baseline (default {default})."
)
MAX_POINTS_LIMIT = 65536
TARGET_OUT_OF_RANGE = (
    "target={target!r} is out of range: the model has {k} output column(s), so the target must "
    "be an integer from 0 to {last}{names}."
)
UNKNOWN_TARGET_NAME = "target={target!r} is not an output name; the output names are {names}."
UNKNOWN_FIELD = "Unknown setting(s) {names}; the settings are {fields}."
BAD_CATEGORICAL = (
    "Unknown categorical baseline {rule!r}. Expected mode (the most frequent category), mean-embedding "
    "(the frequency-weighted mean embedding) or category:FEATURE=VALUE;... (chosen categories)."
)
BAD_OUTPUT_PERIOD = (
    "output_period={value!r} must be a period number (1 is the first period) or a period label; "
    "leave it out for the last period."
)
CATEGORICAL_RULES = ("mode", "mean-embedding", "category")
DEFAULT_CATEGORICAL = "mode"


# --------------------------------------------------------------------------- baseline


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _number_text(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Baseline:
    """A baseline spec: ``kind`` and its ``argument``.

    customer: the id (str); cohort: the label value as text (str); blur: the width in periods
    (float, None = DEFAULT_BLUR_WIDTH); sample: K (int); previous: K periods back (int, None = 1);
    bundle: the folder of an earlier snapshot of the same customers (str); the other kinds take none.
    ``str()`` is the spec the CLI and the URL use (``customer:C00042``, ``blur:1.5``).
    """

    kind: str = "mean"
    argument: str | float | int | None = None

    def __post_init__(self) -> None:
        kind, arg = self.kind, self.argument
        if (kind not in KINDS or (kind in NEEDS_ARGUMENT and arg in (None, ""))
                or (kind in NO_ARGUMENT and arg is not None)):
            raise AttributionError(BAD_SPEC.format(spec=self._text()))
        if kind in ("customer", "cohort", "bundle"):
            object.__setattr__(self, "argument", str(arg))
        elif kind == "previous" and arg is not None:
            if not _is_int(arg) or not 1 <= arg <= MAX_PREVIOUS:
                raise AttributionError(BAD_PREVIOUS.format(high=MAX_PREVIOUS, k=arg))
            object.__setattr__(self, "argument", None if int(arg) == 1 else int(arg))
        elif kind == "blur" and arg is not None:
            if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not math.isfinite(arg) or not arg > 0:
                raise AttributionError(BAD_WIDTH.format(width=arg))
            object.__setattr__(self, "argument", float(arg))
        elif kind == "sample":
            if not _is_int(arg) or not 1 <= arg <= MAX_SAMPLES:
                raise AttributionError(BAD_SAMPLES.format(high=MAX_SAMPLES, k=arg))
            object.__setattr__(self, "argument", int(arg))

    def _text(self) -> str:
        return self.kind if self.argument is None else f"{self.kind}:{self.argument}"

    @classmethod
    def parse(cls, text: str) -> "Baseline":
        """The one parser of a baseline spec: 'customer:C00042' -> Baseline('customer', 'C00042')."""
        if isinstance(text, Baseline):
            return text
        kind, _, arg = str(text).strip().partition(":")
        kind = kind.strip().lower()
        if kind not in KINDS or (kind in NEEDS_ARGUMENT and not arg) or (kind in NO_ARGUMENT and arg):
            raise AttributionError(BAD_SPEC.format(spec=text))
        if kind == "blur":
            if not arg:
                return cls(kind)
            try:
                width = float(arg)
            except ValueError:
                raise AttributionError(BAD_WIDTH.format(width=arg)) from None
            return cls(kind, width)
        if kind in ("sample", "previous") and arg:
            try:
                k = int(arg)
            except ValueError:
                bad = BAD_SAMPLES.format(high=MAX_SAMPLES, k=arg) if kind == "sample" else BAD_PREVIOUS.format(
                    high=MAX_PREVIOUS, k=arg)
                raise AttributionError(bad) from None
            return cls(kind, k)
        if kind == "bundle":
            return cls(kind, str(text).strip().partition(":")[2].strip())  # a path keeps its case and colons
        return cls(kind, arg or None)

    def __str__(self) -> str:
        if self.kind == "blur" and self.argument is not None:
            return f"blur:{_number_text(self.argument)}"
        return self._text()

    @property
    def width(self) -> float:
        """The blur width in periods (blur only)."""
        return DEFAULT_BLUR_WIDTH if self.argument is None else float(self.argument)

    @property
    def periods_back(self) -> int:
        """K of previous:K (previous only)."""
        return 1 if self.argument is None else int(self.argument)

    @property
    def data_wide(self) -> bool:
        """True when the baseline depends on the data set only, not on the customers explained."""
        return self.kind not in ("flat", "blur", "previous", "bundle")

    @property
    def change(self) -> bool:
        """True when the baseline is the same customers at an earlier time (previous:K, bundle:DIR): the
        attributions explain the change of their score since then."""
        return self.kind in ("previous", "bundle")


# --------------------------------------------------------------------------- one parser per setting


def parse_baseline(text: str) -> Baseline:
    return Baseline.parse(text)


def parse_steps(text) -> int | str:
    """'64' -> 64, 'auto' -> 'auto' (the range is checked with the method by ``Settings``)."""
    value = str(text).strip().lower()
    if value == AUTO:
        return AUTO
    try:
        return int(value)
    except ValueError:
        raise AttributionError(BAD_STEPS_TEXT.format(value=text)) from None


def parse_target(text) -> str | None:
    """The target as given: an output index ('1') or name ('churn') as text; '' is None, the
    bundle's own target. ``resolve_target`` (``Settings.resolved``) turns it into the index,
    checked against the model's outputs."""
    return str(text).strip() or None


def _parse_choice(name: str, choices: Sequence[str]) -> Callable[[str], str]:
    def parse(text) -> str:
        value = str(text).strip().lower()
        if value not in choices:
            raise AttributionError(UNKNOWN_SETTING.format(name=name, value=text, expected=", ".join(choices)))
        return value

    parse.__name__ = f"parse_{name}"
    parse.__doc__ = f"'{choices[0]}' -> '{choices[0]}'; one of {', '.join(choices)}."
    return parse


parse_method = _parse_choice("method", METHODS)
parse_space = _parse_choice("space", SPACES)
parse_path = _parse_choice("path", PATHS)


def parse_tolerance(text) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise AttributionError(BAD_TOLERANCE.format(value=text)) from None
    return value


def parse_max_points(text) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise AttributionError(BAD_MAX_POINTS.format(value=text, low=START_POINTS, high=MAX_POINTS_LIMIT,
                                                     default=DEFAULT_MAX_POINTS)) from None


def parse_seed(text) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise AttributionError(BAD_SEED.format(value=text)) from None


def parse_categorical(text) -> str:
    """The baseline rule of categorical inputs: 'mode', 'mean-embedding' or
    'category:FEATURE=VALUE;...' (its features are checked against the model by
    ``explain.core.baselines.parse_categorical``)."""
    value = str(text).strip()
    kind, colon, arg = value.partition(":")
    kind = kind.strip().lower()
    if kind not in CATEGORICAL_RULES or (kind == "category") != bool(arg.strip()):
        raise AttributionError(BAD_CATEGORICAL.format(rule=text))
    if kind == "category":
        items = [part.strip() for part in arg.split(";") if part.strip()]
        if not items or any(not item.partition("=")[1] or not item.partition("=")[0].strip() for item in items):
            raise AttributionError(BAD_CATEGORICAL.format(rule=text))
        return "category:" + ";".join(items)
    return kind


def parse_output(text) -> str | None:
    """The head of a model with several outputs, by name ('churn'); '' is None: the bundle's own
    (bundle.json 'output', else the first). Checked against the model by ``Settings.for_bundle``."""
    return str(text).strip() or None


def parse_output_period(text) -> int | str | None:
    """The period of a model with a prediction per period: its number, 1 the first ('5' -> 5), or its
    label as text ('2025-05'); '' is None: the last (or bundle.json 'output_period'). Checked against
    the bundle's periods by ``Settings.for_bundle``."""
    value = str(text).strip()
    if not value:
        return None
    return int(value) if value.isdigit() else value


PARSERS: dict[str, Callable[[str], object]] = {
    "baseline": parse_baseline, "steps": parse_steps, "method": parse_method, "target": parse_target,
    "space": parse_space, "path": parse_path, "tolerance": parse_tolerance, "seed": parse_seed,
    "categorical": parse_categorical, "max_points": parse_max_points, "output": parse_output,
    "output_period": parse_output_period,
}


def resolve_target(target, n_outputs: int, output_names: Sequence[str] | None = None, default: int = 0) -> int:
    """The output column of ``target`` (an index, a digit string or a name of ``output_names``;
    None: ``default``, the bundle's target)."""
    if target is None:
        target = default
    names = list(output_names) if output_names is not None else None
    if isinstance(target, str) and not target.strip().lstrip("-").isdigit():
        if names is None or target not in names:
            raise AttributionError(UNKNOWN_TARGET_NAME.format(target=target, names=names or "not given"))
        return names.index(target)
    try:
        index = int(target)
    except (TypeError, ValueError):
        index = None
    if index is None or isinstance(target, bool) or not 0 <= index < n_outputs:
        shown = f" (or a name: {', '.join(names)})" if names else ""
        raise AttributionError(TARGET_OUT_OF_RANGE.format(target=target, k=n_outputs, last=n_outputs - 1, names=shown))
    return index


def completeness_limit(prediction, baseline_prediction, tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """The largest |delta| each customer's attributions may leave: ``tolerance`` of |f(x) - f(b)|,
    at least ABSOLUTE_TOLERANCE (what steps="auto" integrates to)."""
    gap = np.abs(np.asarray(prediction, np.float64) - np.asarray(baseline_prediction, np.float64))
    return np.maximum(tolerance * gap, ABSOLUTE_TOLERANCE)


def outside_tolerance(delta, prediction, baseline_prediction, tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """True for each customer whose attributions do not add up to f(x) - f(b) within ``completeness_limit``."""
    return np.abs(np.asarray(delta, np.float64)) > completeness_limit(prediction, baseline_prediction, tolerance)


def check_tolerance(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise AttributionError(BAD_TOLERANCE.format(value=value))
    return float(value)


def check_steps(steps, method: str) -> int | str:
    """``steps`` as an int or 'auto'; out of range for ``method`` raises (quadrature's message)."""
    if steps == AUTO:
        return AUTO
    alphas_and_weights(method, steps)  # validates steps for this rule
    return int(steps)


# --------------------------------------------------------------------------- the settings


@dataclass(frozen=True)
class Settings:
    """What to explain and how: the request of the CLI, the dashboard and the batch store.

    ``baseline`` is None only on an ``Attribution`` computed from baseline arrays given
    directly to ``integrated_gradients``. ``target`` is an output index, or its text or an
    output name as given (``"1"``, ``"churn"``), or None: the bundle's target (``bundle.json``
    ``target``, else the ``positive_label`` class, else output 0); after
    ``resolved(output_names, default)`` it is the index.
    """

    baseline: Baseline | None = Baseline("mean")
    steps: int | str = 64
    method: str = "gausslegendre"
    target: int | str | None = None
    space: str = "output"
    path: str = "joint"
    tolerance: float = DEFAULT_TOLERANCE
    seed: int = 0  # of sample:K
    categorical: str = DEFAULT_CATEGORICAL  # categorical inputs: mode | mean-embedding | category:F=V;...
    max_points: int = DEFAULT_MAX_POINTS  # steps="auto": gradient evaluations per customer and baseline at most
    output: str | None = None  # the head of a model with several outputs (None: the bundle's)
    output_period: int | str | None = None  # the period of a per-period output: number (1 = first) or label; None: last

    def __post_init__(self) -> None:
        def put(name, value):
            object.__setattr__(self, name, value)

        if self.baseline is not None and not isinstance(self.baseline, Baseline):
            put("baseline", parse_baseline(self.baseline))
        for name in ("method", "space", "path"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise AttributionError(UNKNOWN_SETTING.format(
                    name=name, value=value,
                    expected=", ".join({"method": METHODS, "space": SPACES, "path": PATHS}[name])))
            put(name, PARSERS[name](value))
        steps = parse_steps(self.steps) if isinstance(self.steps, str) else self.steps
        put("steps", check_steps(steps, self.method))
        if _is_int(self.target):
            put("target", int(self.target))
        put("tolerance", check_tolerance(parse_tolerance(self.tolerance) if isinstance(self.tolerance, str)
                                         else self.tolerance))
        seed = parse_seed(self.seed) if isinstance(self.seed, str) else self.seed
        if not _is_int(seed):
            raise AttributionError(BAD_SEED.format(value=seed))
        put("seed", int(seed))
        put("categorical", parse_categorical(self.categorical))
        points = parse_max_points(self.max_points) if isinstance(self.max_points, str) else self.max_points
        if not _is_int(points) or not START_POINTS <= points <= MAX_POINTS_LIMIT:
            raise AttributionError(BAD_MAX_POINTS.format(value=points, low=START_POINTS, high=MAX_POINTS_LIMIT,
                                                         default=DEFAULT_MAX_POINTS))
        put("max_points", int(points) if self.steps == AUTO else DEFAULT_MAX_POINTS)  # a fixed rule never reads it
        put("output", None if self.output is None else parse_output(self.output))
        period = self.output_period
        period = parse_output_period(period) if isinstance(period, str) else period
        if period is not None and not isinstance(period, str) and (not _is_int(period) or period < 1):
            raise AttributionError(BAD_OUTPUT_PERIOD.format(value=period))
        put("output_period", int(period) if _is_int(period) else period)

    # -- building ----------------------------------------------------------

    @classmethod
    def from_strings(cls, values: Mapping[str, str], base: "Settings | None" = None) -> "Settings":
        """Settings from their string forms (the URL's query parameters, the CLI's options);
        settings not in ``values`` (or None) keep ``base``'s (default: the defaults)."""
        unknown = sorted(set(values) - set(PARSERS))
        if unknown:
            raise AttributionError(UNKNOWN_FIELD.format(names=", ".join(unknown), fields=", ".join(PARSERS)))
        parsed = {name: PARSERS[name](text) for name, text in values.items() if text is not None}
        return dataclasses.replace(base or cls(), **parsed)

    def replace(self, **changes) -> "Settings":
        """A copy with some settings changed (typed values or string forms)."""
        return dataclasses.replace(self, **changes)

    def resolved(self, output_names: Sequence[str], default: int = 0) -> "Settings":
        """The same settings with ``target`` as the output index of ``output_names`` (None:
        ``default``, the bundle's target)."""
        return self.replace(target=resolve_target(self.target, len(output_names), output_names, default))

    def for_bundle(self, bundle) -> "Settings":
        """``resolved`` against a bundle's output names and its own target (``bundle.target``); for a model with
        several heads or a prediction per period, ``output`` (the head's name) and ``output_period`` (its number,
        1 = the first; None: the bundle's, else the last) resolved first (``explain.core.outputs.choose``), and the
        target against that head's names."""
        from explain.core import outputs

        choice = outputs.choose(bundle, self.output, self.output_period)
        if choice is None:  # one (None, K) output: nothing to choose
            return self.resolved(bundle.output_names, getattr(bundle, "target", 0))
        settings = self.replace(output=choice.output, output_period=choice.period)
        return settings.resolved(choice.output_names, choice.target)

    # -- reading -------------------------------------------------------------

    def target_name(self, output_names: Sequence[str], default: int = 0) -> str:
        """The target's display name."""
        return str(output_names[resolve_target(self.target, len(output_names), output_names, default)])

    def to_strings(self) -> dict[str, str]:
        """Every setting's string form; ``from_strings`` reads it back to equal settings."""
        return {"baseline": str(self.baseline), "steps": str(self.steps), "method": self.method,
                "target": "" if self.target is None else str(self.target), "space": self.space, "path": self.path,
                "tolerance": repr(self.tolerance), "seed": str(self.seed), "categorical": self.categorical,
                "max_points": str(self.max_points), "output": self.output or "",
                "output_period": "" if self.output_period is None else str(self.output_period)}

    def as_dict(self) -> dict:
        """The settings of the CLI's JSON (docs/cli.md): baseline (spec), steps, method, target, space, path."""
        out = {"baseline": str(self.baseline)} if self.baseline is not None else {}
        out.update({"steps": self.steps, "method": self.method, "target": self.target,
                    "space": self.space, "path": self.path})
        if self.categorical != DEFAULT_CATEGORICAL:  # left out by default: earlier runs' settings stay equal
            out["categorical"] = self.categorical
        if self.steps == AUTO:  # the budget of adaptive integration (a fixed rule does not read it)
            out["max_points"] = self.max_points
        for name in ("output", "output_period"):  # a head, a period: only for models that have them
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def identity(self) -> dict:
        """``as_dict()`` + tolerance + seed (JSON values): the batch store's manifest settings."""
        return {**self.as_dict(), "tolerance": self.tolerance, "seed": self.seed}

    def key(self) -> tuple:
        """A hashable key of every setting (the caches' key; ``Settings(**dict(key))`` rebuilds it).

        Call ``resolved(output_names)`` first, so that a target given by name and by index share
        a key.
        """
        return tuple(self.identity().items())

    @classmethod
    def from_key(cls, key: tuple) -> "Settings":
        return cls(**dict(key))


DEFAULT = Settings()

"""What the sidebar and the pages offer: the values of each widget (a link may hold only these)
and their labels."""

from explain.analysis import cohort
from explain.core import settings

STEP_OPTIONS = ("8", "16", "32", "64", "128", "256", "512", "auto")
DEFAULT_STEPS = "64"
SAMPLE_OPTIONS = cohort.SAMPLE_SIZES
BLUR_WIDTHS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
SAMPLE_KS = (4, 8, 16, 32, 64)
PREVIOUS_KS = (1, 2, 3, 4, 6, 12)
TOP_RISK = 25
# The customer box lists every customer up to FULL_LIST of them; beyond, the RECENT customers a
# session looked at and a search's first MATCHES_LISTED matches (any id can be typed).
FULL_LIST = 500
RECENT = 10
MATCHES_LISTED = 20
BASELINE_LABELS = {  # in words: who the customer is compared with (the spec stays in the URL)
    "zero": "a customer with every feature at 0", "mean": "the average customer", "median": "the median customer",
    "customer": "another customer", "cohort": "a group of customers (by outcome)",
    "flat": "their own history, held flat", "blur": "their own history, smoothed",
    "sample": "a sample of customers (expected gradients)",
    "previous": "themselves, earlier (why the score changed)",
}
PATH_LABELS = {"joint": "joint (both inputs move together)", "per-input": "per input (one moves, the other stays)"}
SPACE_LABELS = {"output": "output (probability)", "logit": "logit (log-odds)"}
METHODS, SPACES, PATHS = settings.METHODS, settings.SPACES, settings.PATHS
KINDS = tuple(kind for kind in settings.KINDS if kind != "bundle")  # a snapshot folder is for the CLI and notebook

"""The limits a bundle's files are checked against, as one object (:class:`Limits`): the model file,
its architecture, ``bundle.json`` and the tables, each measured before anything is built from it.

Two sets: :data:`UPLOAD_LIMITS` (= :data:`DEFAULT_LIMITS`, the default of every loader) for the files a
visitor uploads through the dashboard, and :data:`OWNER_LIMITS` for the bundles the owner names on the
command line (``check``, ``attribute``, ``batch``, ``drivers``, ``faithfulness``, ``explain serve --bundle``):
the same bounds on the model file and on JSON (a crafted file cannot crash the process), but tables as large
as the owner's data (a 20,000 customers x 365 days x 24 features bundle opens without ``--limit``).

Every loader of ``explain.modelfile.safe_load`` and ``explain.modelfile.h5`` takes ``limits=Limits(...)``,
and so does ``explain.bundle.load`` for the tables and ``bundle.json``; the refusal messages name the
field to raise (``max_params``, ``max_table_cells`` ...). Only the command line raises them
(``--limit FIELD=VALUE`` of ``check``, ``attribute``, ``batch``, ``faithfulness`` and ``serve`` for the owner's
bundles, ``explain serve --upload-limit FIELD=VALUE`` for uploads, read by :func:`parse_limits`): a visitor of
the dashboard cannot. Standard library only (the memory-capped child
of ``safe_load`` imports it before its cap).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from explain.core.errors import ExplainError

DEFAULT_MAX_FILE_BYTES = 200 * 1024**2  # 200 MiB on disk
DEFAULT_MAX_UNCOMPRESSED_BYTES = 1024**3  # 1 GiB once unpacked (sum of all members)
DEFAULT_MAX_MEMBERS = 1000
DEFAULT_MAX_PARAMS = 50_000_000  # estimated from config.json, before anything is built
# Virtual memory (RLIMIT_AS) of the trial-load child.  Importing TensorFlow alone reserves
# about 1.5-2 GiB of address space (thread stacks, allocator arenas, shared libraries);
# 8 GiB leaves room for a model up to the 1 GiB weight cap, while a layer that needs
# tens of GiB fails in the child instead of in the caller.
DEFAULT_MEMORY_LIMIT_BYTES = 8 * 1024**3
DEFAULT_TIMEOUT_S = 120.0
# CPU seconds (RLIMIT_CPU) of the trial-load child: Keras' import takes about 5, a 200-layer
# Sequential about 25 on this project's 2-core machine (Keras' load is quadratic in the layers).
DEFAULT_CPU_LIMIT_S = 90
# CPU seconds the trial child's load itself (after Keras' import) may take for the model to be loaded a second
# time in the server process (the load that serves it): that load repeats the same work on the server's cores.
DEFAULT_MAX_LOAD_CPU_S = 30.0
# A model's architecture (config.json, an .h5 file's model_config) and bundle.json: read into memory
# and parsed once their depth and number of values are measured on the bytes (explain.core.bounded_json).
MAX_CONFIG_BYTES = 16 * 1024**2
DEFAULT_MAX_JSON_DEPTH = 64          # a Keras config nests about 10-20 levels, bundle.json 3
DEFAULT_MAX_JSON_VALUES = 500_000    # each value becomes a Python object (up to ~200 bytes)
DEFAULT_MAX_LAYERS = 200             # layers of a model, nested models counted (Keras loads 200 in ~25 s)
DEFAULT_MAX_CONFIG_ENTRIES = 20_000  # objects with a class_name in a config (layers, initializers ...)
# A table: cells (rows x columns; CSV: from the bytes, Parquet: from its metadata) and bytes (a CSV
# file, a Parquet file's uncompressed columns). Each CSV cell is held as a Python string while it is
# checked (about 60 bytes), so 10 million cells cost about 0.6 GB.
DEFAULT_MAX_TABLE_CELLS = 10_000_000
# Columns of a table: each is checked on its own (a few ms each), 30,000 text columns took 85 s.
DEFAULT_MAX_TABLE_COLUMNS = 1_000
DEFAULT_MAX_TABLE_BYTES = 256 * 1024**2
# The owner's own tables (named on the command line): bounded only so that a number overflowing memory
# many times over is refused with a message instead of a crash; a Parquet file's cells cost 4-8 bytes each.
OWNER_MAX_TABLE_CELLS = 20_000_000_000
OWNER_MAX_TABLE_COLUMNS = 1_000_000
OWNER_MAX_TABLE_BYTES = 1024**4  # 1 TiB


@dataclass(frozen=True)
class Limits:
    """How large a bundle's files may be before they are refused (``None`` disables ``max_params``).

    Model file: ``max_file_bytes``: the file on disk; ``max_uncompressed_bytes``: a .keras archive
    once unpacked, and the declared size of the HDF5 weights; ``max_members``: files in a .keras
    archive; ``max_params``: weights estimated from the architecture before anything is
    built; ``max_layers``: layers of the model (nested models counted); ``max_config_entries``:
    objects with a ``class_name`` in its config; ``memory_limit_bytes`` (0: no cap), ``timeout_s``
    (wall clock) and ``cpu_limit_s`` (CPU time, 0: no cap): the trial load in a child process
    (``load_model_isolated``); ``max_load_cpu_s``: the CPU time the child's load may have taken for the model
    to be loaded again in the server (``safe_load.load_after_trial``).
    JSON (``config.json``, an .h5 file's ``model_config``, ``bundle.json``): ``max_json_bytes``,
    ``max_json_depth`` (nesting), ``max_json_values`` (every number, text, list and object).
    Tables: ``max_table_cells`` (rows x columns of one table), ``max_table_columns`` and
    ``max_table_bytes`` (a CSV file, the uncompressed columns of a Parquet file).
    """

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES
    max_members: int = DEFAULT_MAX_MEMBERS
    max_params: int | None = DEFAULT_MAX_PARAMS
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    cpu_limit_s: int = DEFAULT_CPU_LIMIT_S
    max_load_cpu_s: float = DEFAULT_MAX_LOAD_CPU_S
    max_layers: int = DEFAULT_MAX_LAYERS
    max_config_entries: int = DEFAULT_MAX_CONFIG_ENTRIES
    max_json_bytes: int = MAX_CONFIG_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    max_json_values: int = DEFAULT_MAX_JSON_VALUES
    max_table_cells: int = DEFAULT_MAX_TABLE_CELLS
    max_table_columns: int = DEFAULT_MAX_TABLE_COLUMNS
    max_table_bytes: int = DEFAULT_MAX_TABLE_BYTES

    def but(self, **changes) -> "Limits":
        """A copy with some fields changed: ``DEFAULT_LIMITS.but(max_params=None)``."""
        return replace(self, **changes)


DEFAULT_LIMITS = Limits()
UPLOAD_LIMITS = DEFAULT_LIMITS  # files uploaded through the dashboard (``explain serve --upload-limit`` raises them)
OWNER_LIMITS = DEFAULT_LIMITS.but(max_table_cells=OWNER_MAX_TABLE_CELLS, max_table_columns=OWNER_MAX_TABLE_COLUMNS,
                                  max_table_bytes=OWNER_MAX_TABLE_BYTES)  # the command line's bundles (``--limit``)

BAD_LIMIT = ("{flag} {given!r}: expected FIELD=VALUE with FIELD one of {fields} and VALUE a number "
             "(none for max_params), for example {flag} max_table_cells=50000000.")


def parse_limits(given: list[str] | None, base: Limits = DEFAULT_LIMITS, flag: str = "--limit") -> Limits:
    """``base`` with the command line's ``--limit FIELD=VALUE`` options applied (``1e8`` and ``50_000_000``
    read as numbers); ``ExplainError`` (BAD_LIMIT) naming the option otherwise."""
    known = {f.name: f.type for f in fields(Limits)}
    changes = {}
    for item in given or []:
        name, _, text = str(item).partition("=")
        name, text = name.strip(), text.strip().replace("_", "")
        try:
            if name not in known or not text:
                raise ValueError(item)
            if name == "max_params" and text.lower() == "none":
                changes[name] = None
                continue
            number = float(text)
            if not number >= 0 or number == float("inf"):
                raise ValueError(item)
            changes[name] = number if name in ("timeout_s", "max_load_cpu_s") else int(number)
        except ValueError:
            raise ExplainError(BAD_LIMIT.format(flag=flag, given=item, fields=", ".join(known))) from None
    return base.but(**changes) if changes else base


def limit_arguments(limits: Limits, base: Limits = DEFAULT_LIMITS, flag: str = "--limit") -> list[str]:
    """``limits`` as ``flag FIELD=VALUE`` arguments (the fields that differ from ``base``): what ``explain serve``
    hands to the dashboard (``--limit`` over OWNER_LIMITS, ``--upload-limit`` over UPLOAD_LIMITS), which reads
    them with :func:`parse_limits`."""
    out = []
    for f in fields(Limits):
        value = getattr(limits, f.name)
        if value != getattr(base, f.name):
            out += [flag, f"{f.name}={value}"]
    return out

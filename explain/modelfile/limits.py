"""The limits a model file is checked against, as one object (:class:`Limits`).

Every loader of ``explain.modelfile.safe_load`` and ``explain.modelfile.h5`` takes ``limits=Limits(...)``; the
refusal messages name the field to raise (``max_params``, ``memory_limit_bytes`` ...).
Standard library only (the memory-capped child of ``safe_load`` imports it before its cap).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
# A model's architecture (config.json, an .h5 file's model_config) is read into memory and parsed.
MAX_CONFIG_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class Limits:
    """How large a model file may be before it is refused (``None`` disables ``max_params``).

    ``max_file_bytes``: the file on disk; ``max_uncompressed_bytes``: a .keras archive once
    unpacked, and the declared size of the HDF5 weights; ``max_members``: files in a .keras
    archive; ``max_params``: weights estimated from the architecture before anything is
    built; ``memory_limit_bytes`` (0: no cap) and ``timeout_s``: the trial load in a child
    process (``load_model_isolated``).
    """

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES
    max_members: int = DEFAULT_MAX_MEMBERS
    max_params: int | None = DEFAULT_MAX_PARAMS
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S

    def but(self, **changes) -> "Limits":
        """A copy with some fields changed: ``DEFAULT_LIMITS.but(max_params=None)``."""
        return replace(self, **changes)


DEFAULT_LIMITS = Limits()

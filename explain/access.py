"""Who may see a dashboard that has a login: the allow-list of e-mail addresses and domains.

An entry is an address (``ana@example.com``: that address only) or a domain after an ``@``
(``@example.com``: every address ``...@example.com``, not ``...@sub.example.com`` nor
``...@evil-example.com``). Both are compared without regard to case. The owner writes them in
``.streamlit/secrets.toml`` (``[access] allow = [...]``) or gives them to ``explain serve --allow``;
the dashboard (``ui.auth``) asks :func:`allowed` with the e-mail address the identity provider vouched
for. An empty list lets nobody in. Standard library only.
"""

from __future__ import annotations

import re

from explain.core.errors import ExplainError

# the part after the @: labels of letters, digits and hyphens, separated by dots
_DOMAIN = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\Z")
BAD_ENTRY = ("Allow-list entry {entry!r} is neither an e-mail address (ana@example.com) nor a domain after an @ "
             "(@example.com for every address of that domain). To fix: write it in one of these two forms.")
NO_ENTRIES = ("A login needs an allow-list: nobody would be let in. To fix: add --allow ana@example.com or "
              "--allow @example.com (repeat for several), or [access] allow = [...] in .streamlit/secrets.toml.")


def normalise(entry: str) -> str:
    """One allow-list entry, trimmed and in lower case; ``ExplainError`` (BAD_ENTRY) when it is neither form."""
    text = str(entry).strip().lower()
    local, at, domain = text.rpartition("@")
    if not at or "@" in local or not _DOMAIN.match(domain) or any(c.isspace() or not c.isprintable() for c in local):
        raise ExplainError(BAD_ENTRY.format(entry=str(entry)[:200]))
    return text


def parse_allow(entries) -> tuple[str, ...]:
    """The allow-list of ``entries`` (each :func:`normalise`d, duplicates dropped, order kept); ``ExplainError``
    naming the first bad entry, or NO_ENTRIES for none."""
    items = [entries] if isinstance(entries, str) else list(entries or [])
    allow = tuple(dict.fromkeys(normalise(e) for e in items))
    if not allow:
        raise ExplainError(NO_ENTRIES)
    return allow


def allowed(email: str | None, allow: tuple[str, ...] | list[str], verified: bool | None = None) -> bool:
    """Whether the user with this ``email`` may see the dashboard: the address is on ``allow``, or its whole
    domain is (``@example.com``). ``verified``: the provider's ``email_verified`` claim; an address the
    provider says it has not verified is never allowed (None: the provider does not say)."""
    if not email or verified is False or not isinstance(email, str):
        return False
    address = email.strip().lower()
    local, at, domain = address.rpartition("@")
    if not at or not local or "@" in local or not _DOMAIN.match(domain):
        return False
    entries = {str(e).strip().lower() for e in allow}
    return address in entries or "@" + domain in entries

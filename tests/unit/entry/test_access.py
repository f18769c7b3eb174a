"""The allow-list of the dashboard's login (explain.access): exact addresses, whole domains, case, and no
match on a partial domain, a subdomain, a look-alike or an address the provider did not verify."""

import pytest

from explain import access
from explain.core.errors import ExplainError

ALLOW = access.parse_allow(["Ana@Example.com", "@Team.Example", " bob@other.example "])


def test_entries_are_trimmed_lowered_and_deduplicated():
    assert ALLOW == ("ana@example.com", "@team.example", "bob@other.example")
    assert access.parse_allow(["a@x.org", "A@X.ORG"]) == ("a@x.org",)
    assert access.parse_allow("@x.org") == ("@x.org",)  # one entry given as text


@pytest.mark.parametrize("email, expected", [
    ("ana@example.com", True),            # the exact address
    ("ANA@EXAMPLE.COM", True),            # case does not matter
    ("  ana@example.com ", True),
    ("bob@example.com", False),           # another address of a domain that is not listed as a whole
    ("carol@team.example", True),         # anyone of a listed domain
    ("Carol@TEAM.example", True),
    ("eve@evil-team.example", False),     # a look-alike domain ending in the same letters
    ("eve@team.example.evil.com", False),  # the listed domain as a prefix
    ("eve@sub.team.example", False),      # a subdomain is another domain
    ("eve@xteam.example", False),
    ("ana@example.com.evil", False),
    ("ana@example.co", False),
    ("ana@example.com@evil.com", False),  # two @
    ("ana", False), ("", False), (None, False), ("@team.example", False),  # not an address
    ("bob@other.example", True),
])
def test_allowed(email, expected):
    assert access.allowed(email, ALLOW) is expected


def test_an_address_the_provider_has_not_verified_is_never_allowed():
    assert access.allowed("ana@example.com", ALLOW, verified=True)
    assert access.allowed("ana@example.com", ALLOW, verified=None)  # the provider does not say
    assert not access.allowed("ana@example.com", ALLOW, verified=False)
    assert not access.allowed("carol@team.example", ALLOW, verified=False)


def test_an_empty_list_lets_nobody_in():
    assert not access.allowed("ana@example.com", ())
    with pytest.raises(ExplainError) as info:
        access.parse_allow([])
    assert str(info.value) == access.NO_ENTRIES


@pytest.mark.parametrize("entry", ["example.com", "ana", "@", "ana@", "@-bad.com", "@a..b", "a@b@c.com",
                                   "a b@c.com", "@c.com/x", "*"])
def test_an_entry_in_neither_form_is_refused_by_name(entry):
    with pytest.raises(ExplainError) as info:
        access.parse_allow(["ok@example.com", entry])
    assert str(info.value) == access.BAD_ENTRY.format(entry=entry)

"""docs/secrets.md one definition of a secret (``evalcli.secrets``) and its invariant: a redaction never leaves a secret
in the text, in any of its encodings or letter cases, and never changes a text that holds none."""

from __future__ import annotations

import base64
import json
import sys
from urllib.parse import quote, quote_plus

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from evalcli.secrets import (
    LOWER_TO_ASCII,
    REDACTED,
    Redactor,
    encodings,
    header_secrets,
    recased,
    redact_url,
    secret_name,
    secret_query_name,
    url_secrets,
    usable,
)


def test_header_names_that_hold_secrets_and_those_that_do_not() -> None:
    for name in ("Authorization", "proxy-authorization", "Cookie", "Set-Cookie", "X-Api-Key", "X-Auth-Token",
                 "X-Session-Id", "X-Client-Secret", "X-Password", "X-Amz-Signature", "X-Goog-Credential", "apikey"):
        assert secret_name(name), name
    for name in ("Host", "Accept", "Content-Type", "X-Api-Version", "User-Agent", "X-Request-Id", "Content-Length"):
        assert not secret_name(name), name


def test_query_names_that_hold_secrets() -> None:
    for name in ("sig", "code", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "api_key",
                 "access_token", "client_secret", "session", "password", "SIG"):
        assert secret_query_name(name), name
    for name in ("q", "page", "version", "codec", "signal", "X-Amz-Date", "X-Amz-Expires"):
        assert not secret_query_name(name), name


def test_only_secret_headers_are_secrets_whatever_their_length() -> None:
    headers = {"X-Api-Key": "s3cr3t", "Host": "127.0.0.1:18080", "Content-Type": "application/json",
               "Accept": "application/json", "X-Api-Version": "2", "Authorization": "Basic YWxpY2U6cHcxMg=="}
    assert header_secrets(headers) == {"s3cr3t", "Basic YWxpY2U6cHcxMg==", "YWxpY2U6cHcxMg==", "alice:pw12", "alice",
                                       "pw12"}
    redact = Redactor(header_secrets(headers), env={})
    dumped = json.dumps(headers)
    assert redact(dumped) == json.dumps({**headers, "X-Api-Key": REDACTED, "Authorization": REDACTED})


def test_urls_lose_their_userinfo_and_secret_query_values_only() -> None:
    url = "https://bob:hunter2pw@h.example/x?X-Amz-Signature=abc123&X-Amz-Credential=AKIA%2F1&X-Amz-Date=20260101&v=2"
    assert redact_url(url) == (f"https://{REDACTED}@h.example/x?X-Amz-Signature={REDACTED}&X-Amz-Credential="
                               f"{REDACTED}&X-Amz-Date=20260101&v=2")
    assert {"bob", "hunter2pw", "bob:hunter2pw", "abc123", "AKIA/1"} <= url_secrets(url)
    # a mistyped --target is not a URL anyone can parse, and still gives up its credentials
    mistyped = "http:ftp://bob:hunter2pw@host/x?api_key=SECRETQ123"
    assert {"bob", "hunter2pw", "SECRETQ123"} <= url_secrets(mistyped)
    assert Redactor(env={})(f"--target {mistyped} is not a target") == \
        f"--target http:ftp://{REDACTED}@host/x?api_key={REDACTED} is not a target"
    assert redact_url("http://127.0.0.1:8000/chat?q=1") == "http://127.0.0.1:8000/chat?q=1"


def test_every_encoding_in_any_case_is_redacted() -> None:
    secret = "pw/12 &<x>"
    redact = Redactor([secret], env={})
    written = [secret, secret.upper(), quote(secret, safe=""), quote_plus(secret).lower(),
               base64.b64encode(secret.encode()).decode(), json.dumps(secret)[1:-1], "pw/12 &amp;&lt;x&gt;"]
    for form in written:
        assert redact(f"<{form}>") == f"<{REDACTED}>", form


SECRET_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))
secrets_strategy = st.lists(st.text(SECRET_CHARS, min_size=4, max_size=16).filter(usable), min_size=1, max_size=3,
                            unique=True)
filler = st.text(st.sampled_from("abcXYZ019 :/?&=@._-[]\"\\%+\n") | SECRET_CHARS, max_size=20)


def _written(secret: str, how: int) -> str:
    forms = [secret, secret.upper(), secret.lower(), quote(secret, safe=""), quote_plus(secret),
             base64.b64encode(secret.encode()).decode(), base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]
    return forms[how % len(forms)]


def _holds(text: str, secrets: list[str]) -> list[str]:
    lowered = text.lower()
    return [form for s in {*secrets, *recased(secrets)} for form in encodings(s)
            if usable(form) and form.lower() in lowered]


@given(secrets_strategy, st.lists(st.tuples(filler, st.integers(0, 100), st.integers(0, 8)), max_size=5), filler)
@settings(max_examples=400, deadline=None)
@example(["abcd", "d]zz"], [("", 0, 0)], "zz")  # "[redacted]" + "zz" is a new secret: redacted again
@example(["aaaa"], [("a", 0, 0)], "aaa")
@example(["PASSİWORD"], [("x ", 0, 0), (" ", 0, 1)], "")  # İ: its lower case is two characters
@example(["straße-pw"], [("x ", 0, 1), (" ", 0, 0)], "")  # ß: its capitals are two (STRASSE-PW)
def test_a_redaction_leaves_no_secret(secrets: list[str], pieces: list[tuple[str, int, int]], tail: str) -> None:
    text = "".join(before + _written(secrets[which % len(secrets)], how) for before, which, how in pieces) + tail
    redact = Redactor(secrets, env={})
    done = redact(text)
    assert not _holds(done, secrets), (text, done)
    assert redact(done) == done  # a redacted text is clean: redacting it again changes nothing


@given(secrets_strategy, filler)
@settings(max_examples=400, deadline=None)
def test_a_text_without_a_secret_is_never_changed(secrets: list[str], text: str) -> None:
    redact = Redactor(secrets, env={})
    assume(not _holds(text, secrets) and not Redactor([], env={}).holds_secret(text))
    assert redact(text) == text


@given(secrets_strategy, st.lists(st.tuples(filler, st.integers(0, 100), st.integers(0, 9)), max_size=6))
@settings(max_examples=400, deadline=None)
def test_texts_searched_at_once_hold_a_secret_whenever_one_of_them_does(secrets: list[str],
                                                                         pieces: list[tuple[str, int, int]]) -> None:
    """``Redactor.holds_any`` (one scan of a conversation's row parameters) never misses what a scan of each finds
    (a URL's userinfo, a secret query value, any form of a secret; ``how`` 9: no secret, only the filler)."""
    redact = Redactor(secrets, env={})
    texts = [before + (_written(secrets[which % len(secrets)], how) if how < 9 else "") for before, which, how in pieces]
    if any(redact.holds_secret(t) for t in texts):
        assert redact.holds_any(texts), texts
    if not redact.holds_any(texts):
        assert all(redact(t) == t for t in texts)


def test_only_the_listed_characters_beyond_ascii_lower_case_to_ascii_or_to_several() -> None:
    """``LOWER_TO_ASCII`` is every character that makes the byte search of ``Redactor._holds_form`` differ from a
    search of the lower-cased text: derived here from this Python's Unicode database."""
    found = [chr(c) for c in range(0x80, sys.maxunicode + 1)
             if len(low := chr(c).lower()) != 1 or any(ord(ch) < 0x80 for ch in low)]
    assert tuple(found) == LOWER_TO_ASCII


beyond_ascii = st.text(st.sampled_from("aKkİıI°…éÉßẞ\u212a\u0130\ud800🙂-_ ") | st.characters(), max_size=12)


@given(st.lists(st.text(st.sampled_from("abcKEY-_09"), min_size=4, max_size=8), min_size=1, max_size=2)
       | st.sampled_from([["pässwörd"], ["PASSİWORD"], ["sk-key-Kelvin"]]),
       st.lists(st.tuples(beyond_ascii, st.integers(0, 100), st.integers(0, 9)), max_size=5), beyond_ascii)
@settings(max_examples=400, deadline=None)
@example(["kelvin-key"], [("°", 0, 9)], "\u212aelvin-key")  # the Kelvin sign's lower case is "k"
@example(["abcd"], [("…", 0, 9)], "AB\u0130CD")
def test_a_text_beyond_ascii_holds_a_form_exactly_when_its_lower_case_does(
        secrets: list[str], pieces: list[tuple[str, int, int]], tail: str) -> None:
    """The byte search of ASCII forms (``Redactor._holds_form``) finds what looking for each form in the lower-cased
    text finds, whatever characters beyond ASCII surround or stand in for a secret's letters."""
    redact = Redactor(secrets, env={})
    text = "".join(before + (_written(secrets[which % len(secrets)], how) if how < 9 else "")
                   for before, which, how in pieces) + tail
    lowered = text.lower()
    slow = redact._anycase.search(text) is not None if len(lowered) != len(text) else \
        any(form in lowered for form in redact._forms)
    assert redact.holds_secret(text) == (slow or Redactor([], env={}).holds_secret(text)), text


@given(st.dictionaries(st.sampled_from(["Host", "Accept", "Content-Type", "X-Api-Version", "User-Agent", "X-Trace"]),
                       st.text(st.sampled_from("abc019./:;= -"), min_size=1, max_size=12), min_size=1),
       st.dictionaries(st.sampled_from(["Authorization", "X-Api-Key", "Cookie", "X-Session", "X-Auth-Token"]),
                       st.text(st.sampled_from("QRSTUVWxyz5678"), min_size=4, max_size=12), min_size=1))
@settings(max_examples=200, deadline=None)
def test_non_secret_header_values_stay_whole(plain: dict[str, str], secret: dict[str, str]) -> None:
    redact = Redactor(header_secrets({**plain, **secret}), env={})
    done = redact(json.dumps({**plain, **secret}))
    for name, value in plain.items():
        assert json.dumps({name: value})[1:-1] in done, (plain, secret, done)
    assert not _holds(done, list(secret.values()))

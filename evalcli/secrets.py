"""What is a secret (docs/secrets.md), and the one redaction every output of evalcli goes through.

A secret is:

- the value of an environment variable a dataset or registry interpolates whose name looks secret
  (``SECRET_WORDS`` anywhere in it, any case), or that the dataset's ``secrets: [NAME, ...]`` declares, or whose
  value is shaped like a provider key (``KEY_SHAPE``);
- the value of a request header whose name looks secret (``Authorization``, ``Proxy-Authorization``, ``Cookie``,
  ``Set-Cookie``, any name holding a secret word), whatever its length, with the credential after its scheme
  (``Bearer X``: ``X``) and, for ``Basic``, the ``user:password`` it encodes;
- a URL's userinfo (``user:password@``: the user, the password and the pair, so also the ``Basic`` credentials
  built from it);
- the value of a query parameter whose name looks secret (the same words, plus ``sig`` and ``code``):
  ``api_key``, ``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``...;
- an API key evalcli may send to a provider: the value of any environment variable named like a secret
  (``OPENAI_API_KEY``, ``HF_TOKEN``, ...) of at least ``ENV_MIN_CHARS`` characters.

``Redactor`` replaces each of them, raw, JSON-, HTML-, URL- or base64-encoded (also inside a longer base64 payload,
at any byte alignment: ``base64_cores``), in any letter case, by ``[redacted]``; it also replaces, wherever a
text holds one, the userinfo of any ``scheme://user:pw@`` and the value of any secret-named query parameter.
Nothing else is ever touched: other header values (``Host``, ``Accept``, ``Content-Type``, ``X-Api-Version``) are
not secrets. Every secret met while loading (``remember``) is known to every redactor made afterwards in the
process, so each boundary (the terminal, the store, the cache, the reports, error messages) needs no list of its
own. A secret remembered with its variable's name (``remember_named``) can also be written as ``${NAME}`` where a
text must keep its words (``secret_references``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"

SECRET_WORDS = re.compile(r"key|token|secret|passw(?:or)?d|credential|auth|session|cookie|signature", re.IGNORECASE)
"""Words that make a name (an environment variable, a header, a query parameter) name a secret."""
SECRET_QUERY = re.compile(rf"{SECRET_WORDS.pattern}|^(?:sig|code)$", re.IGNORECASE)
"""Query parameter names whose values are credentials (``api_key``, ``sig``, ``code``, ``X-Amz-Signature``...)."""
KEY_SHAPE = re.compile(r"\b(sk|pk|rk|key|gsk|xai|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_\-]{8,}")
"""Provider API keys by their look (``sk-...``, ``ghp_...``, ``xoxb-...``): an interpolated value shaped so is a
secret whatever its variable's name."""
MIN_CHARS = 4
"""A secret shorter than this is replaced only where it stands (a URL's userinfo, a secret query value): replacing
every ``x`` or ``42`` of every text would destroy the text, not protect a credential."""
ENV_MIN_CHARS = 8
"""An environment variable named like a secret that no dataset interpolates counts from this length (provider keys
are long; ``XDG_SESSION_TYPE=x11`` is not one)."""
B64_CORE_MIN = 6
"""The fewest base64 characters by which a secret inside a longer base64 payload is recognised (a secret of 5 bytes
or more, at every alignment): fewer would match unrelated base64 (an image, a token) by chance."""

LOWER_TO_ASCII = ("\u0130", "\u212a")
"""The only characters beyond ASCII whose lower case holds ASCII (``İ``: ``i̇``, the Kelvin sign: ``k``) or is not one
character (``tests/test_secrets_definition.py`` derives them from the Unicode database): a text without them holds an
ASCII form in any case exactly when its UTF-8 bytes, ASCII letters lower-cased, do (``Redactor._holds_form``)."""

USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#@\[\]\"'<>\\]+)@")
"""``scheme://user:password@`` anywhere in a text."""
QUERY_VALUE = re.compile(r"([?&;])([A-Za-z0-9_.\-\[\]%]+)=([^&#;\s\"'<>\\]+)")
"""``?name=value`` or ``&name=value`` anywhere in a text."""


def secret_name(name: str) -> bool:
    """Whether a header or environment variable of this name holds a secret."""
    return SECRET_WORDS.search(name) is not None


def secret_query_name(name: str) -> bool:
    """Whether a query parameter of this name holds a secret."""
    return SECRET_QUERY.search(unquote(name)) is not None


def looks_secret(name: str, value: str) -> bool:
    """Whether an interpolated ``${name}`` made ``value`` a secret: named like one, or shaped like a provider key."""
    return bool(value) and (secret_name(name) or KEY_SHAPE.match(value) is not None)


def header_secrets(headers: Mapping[str, Any]) -> set[str]:
    """The secrets among request headers: the values of secret-named headers (whatever their length), the
    credential after a scheme (``Bearer X``: ``X``), what a ``Basic`` credential encodes, a cookie's values."""
    found: set[str] = set()
    for name, raw in headers.items():
        value = str(raw).strip()
        if not value or not secret_name(name):
            continue
        found.add(value)
        scheme, _, credential = value.partition(" ")
        credential = credential.strip()
        if credential and scheme.isalpha():
            found.add(credential)
            if scheme.lower() == "basic":
                found |= _basic_pair(credential)
        if "cookie" in name.lower():
            for part in value.split(";"):
                found.add(part.strip().partition("=")[2].strip())
    return {v for v in found if v}


def _basic_pair(credential: str) -> set[str]:
    """``user:password`` a Basic credential encodes, the user and the password (none when it is not base64)."""
    try:
        pair = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return set()
    user, _, password = pair.partition(":")
    return {pair, user, password}


def url_secrets(url: str) -> set[str]:
    """The credentials inside a URL (or text meant as one, e.g. a mistyped ``--target``): its userinfo (the user, the
    password, ``user:password`` as raw and decoded) and the values of secret-named query parameters."""
    found: set[str] = set()
    for match in USERINFO.finditer(url):
        found |= _userinfo_secrets(match.group(2))
    try:
        parts = urlsplit(url)
        netloc, query = parts.netloc, parts.query
    except ValueError:
        netloc, query = "", url.partition("?")[2]
    if "@" in netloc:
        found |= _userinfo_secrets(netloc.rsplit("@", 1)[0])
    for name, value in parse_qsl(query.partition("#")[0], keep_blank_values=True):
        if value and secret_query_name(name):
            found.add(value)
    for match in QUERY_VALUE.finditer(url):
        if secret_query_name(match.group(2)):
            found |= {match.group(3), unquote(match.group(3))}
    return {v for v in found if v}


def _userinfo_secrets(userinfo: str) -> set[str]:
    found = {userinfo, unquote(userinfo)}
    for text in tuple(found):
        user, _, password = text.partition(":")
        found |= {user, password}
    return found


def redact_url(url: str) -> str:
    """The URL with its userinfo and the values of secret query parameters replaced by ``[redacted]`` (templates
    left as written); the rest as given."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _structural(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_query_name(name) for name, _ in pairs):
            query = urlencode([(name, REDACTED if secret_query_name(name) else value) for name, value in pairs],
                              safe="[]{}% ")
    return _structural(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def _structural(text: str) -> str:
    """Any userinfo of a URL and any secret-named query value in ``text``, replaced."""
    if "@" in text:
        text = USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    if "=" in text:
        text = QUERY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}" if secret_query_name(m.group(2))
                               else m.group(0), text)
    return text


def usable(value: str) -> bool:
    """Whether a secret is replaced wherever it occurs: long enough to be a credential, and not part of
    ``[redacted]`` itself (which would then never be clean)."""
    return len(value) >= MIN_CHARS and value.lower() not in REDACTED


def html_escape(text: str, quote: bool = True) -> str:
    """``html.escape``, without importing ``html`` (its entity table) before a run's first turn (docs/performance.md
    "Before the first turn"; tests/test_import_cuts.py holds the two equal)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;").replace("'", "&#x27;") if quote else text


def encodings(value: str) -> set[str]:
    """Every way a secret may be written in an output: raw, as JSON and HTML (Python's, Jinja2's, XML's) write it,
    URL-encoded, base64 (standard and URL-safe, with and without padding), and base64 inside a longer payload at each
    of the three byte alignments (``base64_cores``)."""
    escaped = html_escape(value, quote=False)
    forms = {value, html_escape(value), escaped, quote(value, safe=""), quote(value), quote_plus(value),
             # quotes as Jinja2/markupsafe (``&#34;``, ``&#39;``) and XML (``&quot;``, ``&apos;``) write them
             escaped.replace('"', "&#34;").replace("'", "&#39;"), escaped.replace('"', "&quot;").replace("'", "&apos;")}
    forms |= {json.dumps(value, ensure_ascii=ascii)[1:-1] for ascii in (True, False)}
    raws = {value.encode("utf-8")}
    if all(ord(c) < 256 for c in value):
        raws.add(value.encode("latin-1"))  # as aiohttp encodes a Basic credential
    for raw in raws:
        for encoded in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
            forms |= {encoded, encoded.rstrip("=")}
        forms |= base64_cores(raw)
    return {f for f in forms if f}


def base64_cores(raw: bytes) -> set[str]:
    """The base64 characters that carry only ``raw``'s bits wherever ``raw`` sits in a longer payload
    (``base64("apiuser:" + token)``): for each of the three byte alignments and both alphabets, the characters between
    the first and the last ones it shares with the bytes around it. Those two edge characters are left (they hold at
    most 4 bits of the secret each, and otherwise the payload's own bits); a core shorter than ``B64_CORE_MIN`` is
    not one (it would match unrelated base64 by chance)."""
    cores = set()
    for shift in range(3):
        start, end = -(-8 * shift // 6), 8 * (shift + len(raw)) // 6  # first and past-last character of raw's bits
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(bytes(shift) + raw).decode()[start:end]
            if len(core) >= B64_CORE_MIN:
                cores.add(core)
    return cores


_known: frozenset[str] = frozenset()
_known_lock = threading.Lock()


def remember(values: Iterable[str]) -> None:
    """Make ``values`` secrets for every redactor made from now on in this process (a dataset's interpolated
    secrets, its target's headers and URL credentials, a ``--target``'s)."""
    global _known
    new = {v for v in values if v} - _known
    if new:
        with _known_lock:
            _known = _known | new


def known() -> frozenset[str]:
    """Every secret remembered so far in this process."""
    return _known


_names: dict[str, str] = {}
_ambiguous: set[str] = set()


def remember_named(pairs: Iterable[tuple[str, str]]) -> None:
    """Make each ``(name, value)`` a secret (``remember``) known by the variable that held it, so a text that must keep
    its words can hold ``${NAME}`` in its place (``evalcli.secret_references``: the response cache, stored digests).
    A name read as two values refers to neither."""
    global _names
    pairs = [(name, value) for name, value in pairs if name and value]
    remember(value for _, value in pairs)
    with _known_lock:
        names = dict(_names)
        for name, value in pairs:
            if names.get(name, value) != value:
                _ambiguous.add(name)
            names[name] = value
        _names = {name: value for name, value in names.items() if name not in _ambiguous}


def remembered_names() -> Mapping[str, str]:
    """The secrets remembered with their variable's name (a new mapping whenever one is added: cheap to compare)."""
    return _names


def named(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every secret whose variable is known, by name: the environment's (named like a secret, ``ENV_MIN_CHARS`` long)
    and those a dataset or registry interpolated or declared (``remember_named``), which win."""
    source = os.environ if env is None else env
    found = {k: v for k, v in source.items() if len(v) >= ENV_MIN_CHARS and secret_name(k) and k not in _ambiguous}
    return {**found, **_names}


def environment_secrets(env: Mapping[str, str] | None = None) -> set[str]:
    """Values of environment variables named like secrets, long enough to be a key (``ENV_MIN_CHARS``)."""
    source = os.environ if env is None else env
    return {v for k, v in source.items() if len(v) >= ENV_MIN_CHARS and secret_name(k)}


class Redactor:
    """Replaces every secret in a text with ``[redacted]`` (docs/secrets.md): the environment's (``env``, default
    ``os.environ``), those remembered in this process, and ``extra``; also any URL userinfo and secret query value."""

    def __init__(self, extra: Iterable[str] = (), env: Mapping[str, str] | None = None) -> None:
        values = {v for v in (*environment_secrets(env), *known(), *extra) if usable(v)}
        self.values = frozenset(values)
        """Every secret value this redactor replaces."""
        written = {f for v in values | recased(values) for f in encodings(v) if usable(f)}
        forms = sorted({f.lower() for f in written}, key=len, reverse=True)
        self._forms = tuple(forms)
        """Each form of each secret, lower-cased: looked for one by one (``in``), which took half the time of one
        search of their alternatives, from 6 forms (one secret) to 68 (twelve)."""
        self._ascii_forms = tuple(f.encode() for f in forms) if all(f.isascii() for f in forms) else None
        """The forms as bytes when all are ASCII (most secrets are): looked for in a text's UTF-8 bytes, whose ASCII
        letters ``bytes.lower`` lower-cases at a fraction of the cost of ``str.lower`` on a text beyond ASCII (which
        looks each character up in the Unicode database: most of a conversation's secret scan)."""
        alternatives = "|".join(re.escape(f) for f in forms)
        # searched in the lower-cased text: an IGNORECASE search of the same alternatives took ten times as long
        self._pattern = re.compile(alternatives) if forms else None
        # a form whose lower case is longer (``PASSİWORD``: ``passi̇word``) is also looked for as written: an
        # IGNORECASE search matches ``İ`` to itself (and to ``i``), never to the two characters of its lower case
        unfolded = {f for f in written if len(f.lower()) != len(f)}
        anycase = sorted({*forms, *unfolded}, key=len, reverse=True)  # the longest first, as ``forms``
        self._anycase = re.compile("|".join(re.escape(f) for f in anycase), re.IGNORECASE) if forms else None
        """For the rare text whose lower case is not as long as itself (``İ``), where positions would not match."""

    def including(self, extra: Iterable[str]) -> Redactor:
        """This redactor, or one that also replaces ``extra`` when some of it is new."""
        more = {v for v in extra if usable(v)} - self.values
        return self if not more else Redactor(self.values | more, env={})

    def holds_secret(self, text: str) -> bool:
        """Whether ``text`` holds something this redactor replaces."""
        return bool(text) and ((self._anycase is not None and self._holds_form(text)) or _structural(text) != text)

    def holds_any(self, texts: Iterable[str]) -> bool:
        """Whether any of ``texts`` holds something this redactor replaces: one scan of them joined by newlines
        instead of one a text (a conversation's row parameters, ``Store._clean``). No URL userinfo or query value
        spans a newline, and every secret form in one text is in the joined text, so a text that holds a secret
        always makes the whole hold one; only a secret that itself holds a newline may match across two texts (a
        clean set then looks unclean, and each text is redacted on its own: slower, never less safe)."""
        return self.holds_secret("\n".join(dict.fromkeys(texts)))  # each text once: ids recur in every row

    def _holds_form(self, text: str) -> bool:
        assert self._anycase is not None
        if self._ascii_forms is not None and LOWER_TO_ASCII[0] not in text and LOWER_TO_ASCII[1] not in text:
            # every other character beyond ASCII lower-cases to one character beyond ASCII, whose UTF-8 bytes are
            # all >= 0x80: an ASCII form is in ``text.lower()`` exactly when its bytes are in these
            folded = text.encode("utf-8", "surrogatepass").lower()
            return any(form in folded for form in self._ascii_forms)
        lowered = text.lower()
        if len(lowered) != len(text):
            return self._anycase.search(text) is not None
        return any(form in lowered for form in self._forms)

    def _replaced(self, text: str) -> str:
        """Every secret form in ``text`` (in any case) replaced."""
        if self._pattern is None or self._anycase is None:
            return text
        lowered = text.lower()
        if len(lowered) != len(text):
            return self._anycase.sub(REDACTED, text)
        if not any(form in lowered for form in self._forms):
            return text
        pieces, at = [], 0
        for match in self._pattern.finditer(lowered):
            pieces += [text[at:match.start()], REDACTED]
            at = match.end()
        return "".join([*pieces, text[at:]]) if pieces else text

    def __call__(self, text: str) -> str:
        if not text:
            return text
        # again until nothing is left: a replacement may make a secret of what was beside it ("[redacted]" + "]x")
        for _ in range(8):
            done = _structural(self._replaced(text))
            if done == text:
                break
            text = done
        return text

    def dumps(self, value: Any, **options: Any) -> str:
        """``json.dumps(self.value(value), **options)``, without walking the value when its JSON holds no secret
        (the common case, and walking every string of every stored conversation was most of a report's time). One
        encoder per set of options, made once (``json.dumps`` with options makes a new one for every value)."""
        encode = _encoder(options)
        try:
            text = encode(value)
        except ValueError as exc:  # a NaN or an infinity, which JSON has not: null (docs/reference/json.md)
            if "Out of range float" not in str(exc):
                raise
            value = finite_json(value)
            text = encode(value)
        if not self.holds_secret(text):
            return text
        return encode(self.value(value))

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string (keys included) redacted; done before serialising,
        so a secret holding quotes or backslashes is still found. Anything that is not JSON (an object a target
        returned, bytes, a date) becomes its text here, redacted, as serialising would have made it unredacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else self(str(k)) if not _json_key(k) else k: self.value(v)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self(str(value))


def recased(values: Iterable[str]) -> set[str]:
    """The secrets written in capitals where lower-casing those does not give the secret's lower case back
    (``straße``: ``STRASSE``, found in any case, so ``strasse`` too), each looked for as a secret of its own; none
    for most secrets (every ASCII one)."""
    return {upper for v in values if (upper := v.upper()).lower() != v.lower()}


_encoders: dict[tuple[tuple[str, Any], ...], Callable[[Any], str]] = {}


def _encoder(options: dict[str, Any]) -> Callable[[Any], str]:
    """``json.dumps(value, allow_nan=False, **options)`` as a function of ``value``, one ``JSONEncoder`` per set of
    options: a NaN or an infinity raises ``ValueError`` (``Redactor.dumps`` writes it as ``null``)."""
    key = tuple(sorted(options.items()))
    encode = _encoders.get(key)
    if encode is None:
        encode = _encoders[key] = json.JSONEncoder(allow_nan=False, **options).encode
    return encode


def finite_json(value: Any) -> Any:
    """``value`` with every NaN and infinity (in mappings, lists and tuples) as ``None``, for what ``Redactor.dumps``
    writes (``--json``, ``show --json``, ``diff``/``compare --json``, the view's API, redacted rows): JSON has neither
    (docs/reference/json.md), and ``JSON.parse`` and ``jq`` refuse the ``NaN`` Python writes by default. Rows stored
    as they were made (``stored_json.dumps``) keep Python's ``NaN``; they are read back by Python."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def _json_key(key: Any) -> bool:
    """Keys ``json.dumps`` writes as they are (anything else it would turn into text, or refuse)."""
    return key is None or isinstance(key, (bool, int, float))


_current: tuple[dict[Any, Any], frozenset[str], Redactor] | None = None


def redactor() -> Redactor:
    """The redactor of everything known now (the environment's secrets and those remembered), made again only when
    either changes (a model call's error text or cached reply is redacted on every call; reading the environment
    and compiling the pattern each time cost more than the redaction)."""
    global _current
    raw = getattr(os.environ, "_data", None)  # CPython's mapping under os.environ: comparing it is cheap
    if not isinstance(raw, dict):
        return Redactor()
    current = _current
    if current is None or current[1] is not _known or current[0] != raw:
        current = _current = (dict(raw), _known, Redactor())
    return current[2]


def redact_text(text: str) -> str:
    """``text`` with every secret known now replaced (for error texts, the terminal, the cache)."""
    return redactor()(text)


def cut(text: str, width: int, more: str = "…") -> str:
    """``text`` on one line with every secret known now replaced, cut to ``width`` characters (``more`` ending it when
    it was cut). Redacted first, as it was written: cut first, a secret across the cut left its start, which no
    redaction finds afterwards (22 of an API key's 24 characters); put on one line first, a secret holding a line
    break or two spaces (a PEM key, a passphrase) was no longer itself (docs/secrets.md)."""
    flat = " ".join(redact_text(text).split())
    return flat if len(flat) <= width else flat[: width - len(more)] + more

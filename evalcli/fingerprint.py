"""The resolved-configuration fingerprint (docs/reliability.md): what ``--resume`` compares, so nothing can change a
run without it noticing.

The configuration is a tree (``Dataset.resolved_configuration``: after ``${VAR}`` interpolation, with every file the
dataset names read). Its fingerprint is a digest per leaf of the dataset's settings, by the leaf's path
(``target.http.body.style``), and per conversation one entry (``item_entry``: a digest of it whole, a short one per
leaf), each salted with a random salt the run keeps beside them (docs/identity.md). Comparing two fingerprints names
the paths that differ (``data[3].target_options.temperature``), never a value.

A leaf that holds a secret (a header value, a persona's PIN) is never digested as it is with only that stored salt: a
guessed value could be confirmed against it offline (docs/reliability.md, "Secrets"). Its digest is two parts: the
salted digest of the leaf with each secret as a reference to its variable (``${PIN}``; the same on every machine), and
an HMAC of the leaf as it is under a key kept outside the database (``digest_key``: ``$EVALCLI_DIGEST_KEY``, else a key
file of the user's), with that key's id. A resume on a machine with the same key notices a changed secret; elsewhere
it compares the rest of the leaf (``unverifiable`` names those leaves).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .secret_references import c_encoder, digestible, json_string, json_text, secret_check

SALT = "#salt"
"""The key of the salt among a fingerprint's paths."""
SHAPES = "#shapes"
"""The key of the conversations' leaf paths, once per shape (JSON: a list of lists of paths relative to ``data[N]``)."""
SCHEME = "#scheme"
"""The key saying how a conversation's leaves are digested: ``RELATIVE`` (absent in runs stored before: each by its
whole path, ``data[3].turns[0].input``)."""
RELATIVE = "relative"
"""Each leaf of a conversation digested by its path within it (``.turns[0].input``)."""
KEYS = (SALT, SHAPES, SCHEME)
"""A fingerprint's keys that are no path of the configuration."""
ITEMS = "data"
"""The configuration's list of conversations: one entry each in a fingerprint."""
KEY_VARIABLE = "EVALCLI_DIGEST_KEY"
"""The environment variable whose value keys the digests of secret-bearing leaves (the same on every machine that
resumes a run: a CI secret)."""


class ItemTrees:
    """The configuration's conversations made one at a time as they are iterated (``fingerprint`` digests each and
    lets it go: a run of 100,000 conversations never holds their trees at once, docs/performance.md#memory)."""

    def __init__(self, make: Callable[[], Iterator[Any]], count: int) -> None:
        self.make, self.count = make, count

    def __iter__(self) -> Iterator[Any]:
        return self.make()

    def __len__(self) -> int:
        return self.count


def leaves(tree: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) for every leaf: mappings by key (``a.b``), lists by index (``a[3]``); an empty mapping or list
    is a leaf of its own (so adding its first entry changes it)."""
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, (list, tuple)) and tree:
        for n, value in enumerate(tree):
            yield from leaves(value, f"{path}[{n}]")
    else:
        yield path, tree


def fingerprint(tree: Any, salt: str | None = None, bears: Callable[[str], bool] | None = None) -> dict[str, str]:
    """The configuration's fingerprint: its salt (new unless given), a digest per leaf path (``leaf_digest``) outside
    the conversations, and one entry per conversation (``data[3]``, ``item_entry``): a digest of its whole subtree
    and a short digest of each of its leaves, the leaves' paths kept once per shape (``SHAPES``). ``bears``:
    ``secret_check()`` as it was when the run started (a new run's fingerprint is made beside its first turns,
    docs/performance.md#the-first-turn); made now when not given."""
    salt = salt if salt is not None else os.urandom(8).hex()
    digests = {SALT: salt}
    bears = bears or secret_check()
    items = tree.get(ITEMS) if isinstance(tree, dict) else None
    if not isinstance(items, list | ItemTrees) or not items:
        for path, value in leaves(tree):
            digests[path] = leaf_digest(salt, path, value, bears=bears)
        return digests
    for path, value in leaves({key: value for key, value in tree.items() if key != ITEMS}):
        if path:
            digests[path] = leaf_digest(salt, path, value, bears=bears)
    shapes: dict[tuple[str, ...], int] = {}
    shorts: dict[Any, Any] = {}
    for n, item in enumerate(items):
        digests[f"{ITEMS}[{n}]"] = item_entry(salt, n, item, shapes, bears, shorts)
    digests[SHAPES] = json.dumps([list(shape) for shape in shapes])
    digests[SCHEME] = RELATIVE
    return digests


def item_entry(salt: str, n: int, item: Any, shapes: dict[tuple[str, ...], int],
               bears: Callable[[str], bool] | None = None, shorts: dict[Any, Any] | None = None) -> str:
    """``<shape>|<digest of the item>|<short digest of each leaf>``: the item's digest says whether it changed; the
    short ones (4 hex digits, or the keyed form of a secret-bearing leaf) only which of its leaves did, each digested
    by its path within the conversation (``.turns[0].input``: ``RELATIVE``).

    One pass over the conversation: its canonical text, digested whole and checked for a secret once; when it holds
    none, neither does any leaf, and each leaf's short digest is looked up in ``shorts`` (the same leaf at the same
    relative path, as most of a dataset's conversations share, is digested once a fingerprint). A conversation that
    holds a secret is digested leaf by leaf (``leaf_digest``), secret-bearing leaves keyed."""
    prefix = f"{ITEMS}[{n}]"
    check = bears or secret_check()
    text = _text(item)
    if check(text):
        index = shapes.setdefault(tuple([rel for rel, _ in leaf_texts(item)]), len(shapes))
        whole = leaf_digest(salt, prefix, item, bears=check)
        listed = ",".join(leaf_digest(salt, path[len(prefix):], value, short=True, bears=check)
                          for path, value in leaves(item, prefix))
        return f"{index}|{whole}|{listed}"
    known = shorts if shorts is not None else {}
    if len(known) > MEMO:  # a run's memory does not grow with its conversations' distinct leaves
        known.clear()
    rels: list[str] = []
    digests: list[str] = []
    _digest_leaves(item, "", salt, known, rels, digests)
    index = shapes.setdefault(tuple(rels), len(shapes))
    return f"{index}|{_salted(salt, prefix, text)}|{','.join(digests)}"


def _digest_leaves(tree: Any, path: str, salt: str, known: dict[Any, Any], rels: list[str], digests: list[str]) -> None:
    """``rels`` + the paths of ``leaf_texts(tree)`` and ``digests`` + each leaf's short digest (``_salted`` of its path
    and JSON text, 4 hex digits), in one walk: a text, ``null`` or boolean leaf is looked up in ``known`` by its path and
    the value itself (a text's hash is kept by the text, and its JSON is made only the first time), any other by its
    path and JSON text (docs/performance.md)."""
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            kind = type(value)
            at = f"{path}.{key}"
            if kind is str or value is None or kind is bool:
                rels.append(at)
                short = known.get((at, value))
                if short is None:
                    leaf = json_string(value) if kind is str else _SCALARS[value]
                    short = known[(at, value)] = _salted(salt, at, leaf)[:4]
                digests.append(short)
            elif (kind is dict or kind is list) and not value:
                _digest_leaf(at, "{}" if kind is dict else "[]", salt, known, rels, digests)
            elif kind is dict:
                _digest_mapping(value, at, salt, known, rels, digests)
            else:
                _digest_leaves(value, at, salt, known, rels, digests)
    elif isinstance(tree, list | tuple) and tree:
        for n, value in enumerate(tree):
            at = f"{path}[{n}]"
            if type(value) is str:
                rels.append(at)
                short = known.get((at, value))
                if short is None:
                    short = known[(at, value)] = _salted(salt, at, json_string(value))[:4]
                digests.append(short)
            else:
                _digest_leaves(value, at, salt, known, rels, digests)
    else:
        _digest_leaf(path, _leaf_text(tree), salt, known, rels, digests)


def _digest_mapping(value: dict[Any, Any], path: str, salt: str, known: dict[Any, Any], rels: list[str],
                    digests: list[str]) -> None:
    """A mapping's leaves as ``_digest_leaves`` finds them, walked once per mapping object and path: conversations
    share one mapping where their content is the same (a turn's gates and scorers: ``Dataset._item_tree``), and
    ``known`` keeps it (so its id stays its own) with its leaves' paths and digests."""
    key = (path, id(value), dict)  # the third member keeps it from every key of a leaf
    seen = known.get(key)
    if seen is not None and seen[0] is value:
        rels.extend(seen[1])
        digests.extend(seen[2])
        return
    start = len(rels)
    _digest_leaves(value, path, salt, known, rels, digests)
    known[key] = (value, rels[start:], digests[start:])


def _digest_leaf(path: str, text: str, salt: str, known: dict[Any, Any], rels: list[str], digests: list[str]) -> None:
    """One leaf known by its JSON text (``_digest_leaves``; the third member keeps its key from any keyed by value)."""
    rels.append(path)
    short = known.get((path, text, None))
    if short is None:
        short = known[(path, text, None)] = _salted(salt, path, text)[:4]
    digests.append(short)


MEMO = 2048
"""How many leaves' short digests a fingerprint keeps to look up (those most conversations share come back at once
after it is emptied)."""
_SCALARS: dict[Any, str] = {None: "null", True: "true", False: "false"}


def leaf_texts(tree: Any) -> list[tuple[str, str]]:
    """``leaves`` of a conversation, by their paths within it (``.turns[0].input``; ``""``: the conversation itself,
    when it is a leaf), each with its JSON text (``_text``): (path, text), in ``leaves``' order."""
    found: list[tuple[str, str]] = []
    _collect(tree, "", found)
    return found


def _collect(tree: Any, path: str, found: list[tuple[str, str]]) -> None:
    """``found`` + the leaves under ``tree`` (at ``path``): the common kinds of leaf made text here, not in a call."""
    add = found.append
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            kind = type(value)
            if kind is str:
                add((f"{path}.{key}", json_string(value)))
            elif value is None or kind is bool:
                add((f"{path}.{key}", _SCALARS[value]))
            elif (kind is dict or kind is list) and not value:
                add((f"{path}.{key}", "{}" if kind is dict else "[]"))
            else:
                _collect(value, f"{path}.{key}", found)
    elif isinstance(tree, list | tuple) and tree:
        for n, value in enumerate(tree):
            if type(value) is str:
                add((f"{path}[{n}]", json_string(value)))
            else:
                _collect(value, f"{path}[{n}]", found)
    else:
        add((path, _leaf_text(tree)))


def _leaf_text(value: Any) -> str:
    if type(value) is str:
        return json_string(value)
    if value is None or type(value) is bool:
        return _SCALARS[value]
    return _text(value)


def leaf_digest(salt: str, path: str, value: Any, short: bool = False, bears: Callable[[str], bool] | None = None) -> str:
    """A leaf's (or a subtree's) digest: salted, and for one that holds a secret ``<salted digest with references>.<key
    id>.<keyed digest>``, so the stored digest never confirms a guessed secret. ``short``: 4 hex digits when it holds
    none (a conversation's leaves, whose whole digest is kept beside them). ``bears``: ``secret_check()``, made once
    by a caller digesting many leaves."""
    text = _text(value)
    covered = digestible(value, text, bears)
    shown = text if covered is value else _text(covered)
    if shown == text:
        return _salted(salt, path, text)[:4 if short else 16]
    keyed = hmac.new(digest_key(), f"{salt}\0{path}\0{text}".encode(), hashlib.sha256).hexdigest()[:16]
    return f"{_salted(salt, path, shown)}.{key_id()}.{keyed}"


def _text(value: Any) -> str:
    """``json_text(value, sort_keys=True)``: a mapping or list (a conversation's tree, once a conversation) by a C
    encoder made once, not the one ``JSONEncoder.encode`` makes (and its dict of the containers under way) for every
    value; whatever it cannot write (a key that is not text, a container inside itself) is left to ``json_text``, which
    writes it or raises as it always did (docs/performance.md)."""
    if type(value) is dict or type(value) is list:
        try:
            return _SORTED(value)
        except (TypeError, ValueError, RecursionError):
            pass
    return json_text(value, sort_keys=True)


_SORTED = c_encoder(sort_keys=True, default=repr, ensure_ascii=False)


def _salted(salt: str, path: str, text: str) -> str:
    return hashlib.sha256(f"{salt}\0{path}\0{text}".encode()).hexdigest()[:16]


def shards_salt(dataset_hash: str, count: int) -> str:
    """The salt of every shard's fingerprint in a ``--shard I/N`` split of one dataset file: one salt, so ``merge`` can
    compare the shards' configurations (``stored_differences``); a stored salt beside its digests guards nothing a
    random one would (a secret-bearing leaf is keyed outside the database either way: docs/identity.md)."""
    return hashlib.sha256(f"shards\0{dataset_hash}\0{count}".encode()).hexdigest()[:16]


def stored_differences(first: dict[str, str], other: dict[str, str]) -> list[str]:
    """The paths whose digests differ between two fingerprints made with one salt (a split's shards): a conversation
    by its entry (``data[3]``), a secret-bearing leaf by the rest of it, whatever key digested it (docs/identity.md)."""
    found = []
    for path in dict.fromkeys([*first, *other]):
        mine, theirs = first.get(path), other.get(path)
        if path in KEYS or mine == theirs:
            continue
        if mine is not None and theirs is not None:
            mine, theirs = mine.split("|")[1] if "|" in mine else mine, theirs.split("|")[1] if "|" in theirs else theirs
            a, b = mine.split("."), theirs.split(".")
            if len(a) == len(b) == 3 and a[0] == b[0]:
                continue  # the rest is the same: a secret per job (an API key) scores alike, one digest key or two
        found.append(path)
    return found


def differences(stored: dict[str, str], tree: Any) -> list[str]:
    """The paths where ``tree`` differs from the configuration ``stored`` fingerprinted (computed with its salt):
    ``path (changed)``, ``path (removed)``, ``path (added)``. A secret-bearing leaf keyed on another machine is
    compared without its secrets (``unverifiable``). A conversation whose digest is the same is not looked into; one
    that changed is compared leaf by leaf (``data[3] (changed)`` when no leaf's short digest tells which)."""
    salt, relative = stored[SALT], stored.get(SCHEME) == RELATIVE
    then, now, items = compared(stored, tree)
    changes = [f"{path} (changed)" for path, digest in then.items()
               if path in now and not _same(digest, salt, _digested_as(path, relative), now[path])]
    removed = [f"{path} (removed)" for path in then if path not in now]
    added = [f"{path} (added)" for path in now if path not in then]
    named = {change[:change.index("]") + 1] for change in changes + removed + added if change.startswith(f"{ITEMS}[")}
    return changes + [f"{path} (changed)" for path in items if path not in named] + removed + added


def _digested_as(path: str, relative: bool) -> str:
    """The path a stored leaf digest was made with: a conversation's leaf by its path within it when the fingerprint
    says so (``RELATIVE``: ``data[3].turns[0].input`` -> ``.turns[0].input``), any other by its whole path."""
    return path[path.index("]") + 1:] if relative and path.startswith(f"{ITEMS}[") else path


def compared(stored: dict[str, str], tree: Any) -> tuple[dict[str, str], dict[str, Any], list[str]]:
    """What ``differences`` compares: the stored digests by leaf path and the leaves now, both without the
    conversations whose digest is the same, and the conversations that changed (their leaves are in both)."""
    salt = stored[SALT]
    now = dict(leaves(tree))
    then = {path: digest for path, digest in stored.items() if path not in KEYS}
    if SHAPES not in stored:  # one digest per leaf (runs stored before conversations had one digest each)
        return then, now, []
    items = tree.get(ITEMS) if isinstance(tree, dict) else None
    items = items if isinstance(items, list) else []
    shapes = [tuple(shape) for shape in json.loads(stored[SHAPES])]
    now = {path: value for path, value in now.items() if not path.startswith(f"{ITEMS}[")}
    changed: list[str] = []
    for n, item in enumerate(items):
        key = f"{ITEMS}[{n}]"
        entry = then.pop(key, None)
        if entry is None:
            now[key] = item  # a conversation added: named by its whole path
            continue
        shape, digest, shorts = entry.split("|")
        if _same(digest, salt, key, item):
            continue
        changed.append(key)
        then.update(zip((key + rel for rel in shapes[int(shape)]), shorts.split(","), strict=True))
        now.update(leaves(item, key))
    for key in [path for path in then if path.startswith(f"{ITEMS}[") and "|" in then[path]]:
        then[key] = then[key].split("|")[1]  # a conversation removed: named by its whole path
    return then, now, changed


def paths(stored: dict[str, str], tree: Any) -> tuple[set[str], set[str]]:
    """The leaf paths of the stored configuration and of ``tree``, with the conversations that changed looked into
    (what a refusal's names are made of: ``collapsed`` in evalcli/run/resume.py)."""
    then, now, _ = compared(stored, tree)
    items = tree.get(ITEMS) if isinstance(tree, dict) and SHAPES in stored else None
    same = {f"{ITEMS}[{n}]" for n in range(len(items))} - set(now) if isinstance(items, list) else set()
    return set(then) | same, set(now) | same


def unverifiable(stored: dict[str, str]) -> list[str]:
    """The paths whose secrets a comparison here cannot check: keyed with another key than this machine's."""
    here = key_id()
    shapes = [tuple(shape) for shape in json.loads(stored[SHAPES])] if SHAPES in stored else []
    found = []
    for path, digest in stored.items():
        if "|" in digest:
            shape, whole, shorts = digest.split("|")
            if _keyed_elsewhere(whole, here):
                found += [path + rel for rel, short in zip(shapes[int(shape)], shorts.split(","), strict=True)
                          if _keyed_elsewhere(short, here)]
        elif path not in KEYS and _keyed_elsewhere(digest, here):
            found.append(path)
    return found


def _keyed_elsewhere(digest: str, here: str) -> bool:
    return digest.count(".") == 2 and digest.split(".")[1] != here


def _same(digest: str, salt: str, path: str, value: Any) -> bool:
    now = leaf_digest(salt, path, value, short=len(digest) == 4)
    if digest == now:
        return True
    parts, now_parts = digest.split("."), now.split(".")
    if len(parts) == 3 and len(now_parts) == 3:
        return parts[0] == now_parts[0] and parts[1] != now_parts[1]  # another machine's key: the rest only
    if len(parts) == 1 and len(now_parts) == 3:  # stored before secret-bearing leaves were keyed
        return digest == _salted(salt, path, _text(value))[:len(digest)]
    return False


@functools.cache
def _file_key(path: Path) -> bytes:
    """The key in ``path``, made (32 random bytes, readable by the user only) when there is none; a key of this
    process only when the file can be neither read nor made."""
    try:
        return path.read_bytes().strip() or _made(path)
    except FileNotFoundError:
        return _made(path)
    except OSError:
        return os.urandom(32).hex().encode()


def _made(path: Path) -> bytes:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False) as handle:
            handle.write(os.urandom(32).hex().encode())
        os.chmod(handle.name, 0o600)
        try:
            os.link(handle.name, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(handle.name)
        return path.read_bytes().strip()
    except OSError:
        return os.urandom(32).hex().encode()


def key_path() -> Path:
    """The user's digest key file: ``$XDG_CONFIG_HOME/evalcli/digest.key`` (``~/.config`` by default)."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "evalcli" / "digest.key"


def digest_key() -> bytes:
    """The key of secret-bearing digests: ``$EVALCLI_DIGEST_KEY``, else the user's key file (made on first use)."""
    given = os.environ.get(KEY_VARIABLE)
    return given.encode() if given else _file_key(key_path())


def key_id() -> str:
    """A name for the key (8 hex digits of a digest of it), stored beside keyed digests; it tells nothing of a secret."""
    return hashlib.sha256(b"evalcli digest key\0" + digest_key()).hexdigest()[:8]

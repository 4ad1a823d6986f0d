"""The resolved-configuration fingerprint (docs/reliability.md): what ``--resume`` compares, so nothing can change a
run without it noticing.

The configuration is a tree (``Dataset.resolved_configuration``: after ``${VAR}`` interpolation, with every file the
dataset names read). Its fingerprint is one digest per leaf, by the leaf's path (``data[3].target_options.temperature``,
``target.http.body.style``), each salted with a random salt the run keeps beside them. Comparing two fingerprints names
the paths that differ, never a value.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .secret_references import digestible

SALT = "#salt"
"""The key of the salt among a fingerprint's paths."""
KEY_VARIABLE = "EVALCLI_DIGEST_KEY"
"""The environment variable whose value keys the digests of secret-bearing leaves (the same on every machine that
resumes a run: a CI secret)."""


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


def fingerprint(tree: Any, salt: str | None = None) -> dict[str, str]:
    """The configuration's fingerprint: its salt (new unless given) and a digest per leaf path (``leaf_digest``)."""
    salt = salt if salt is not None else os.urandom(8).hex()
    digests = {SALT: salt}
    for path, value in leaves(tree):
        digests[path] = leaf_digest(salt, path, value)
    return digests


def leaf_digest(salt: str, path: str, value: Any) -> str:
    """A leaf's digest: salted, and for a leaf that holds a secret ``<salted digest with references>.<key id>.<keyed
    digest>``, so the stored digest never confirms a guessed secret."""
    text = _text(value)
    shown = _text(digestible(value))
    if shown == text:
        return _salted(salt, path, text)
    keyed = hmac.new(digest_key(), f"{salt}\0{path}\0{text}".encode(), hashlib.sha256).hexdigest()[:16]
    return f"{_salted(salt, path, shown)}.{key_id()}.{keyed}"


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)


def _salted(salt: str, path: str, text: str) -> str:
    return hashlib.sha256(f"{salt}\0{path}\0{text}".encode()).hexdigest()[:16]


def differences(stored: dict[str, str], tree: Any) -> list[str]:
    """The paths where ``tree`` differs from the configuration ``stored`` fingerprinted (computed with its salt):
    ``path (changed)``, ``path (removed)``, ``path (added)``. A secret-bearing leaf keyed on another machine is
    compared without its secrets (``unverifiable``)."""
    salt = stored[SALT]
    now = dict(leaves(tree))
    changed = [f"{path} (changed)" for path, digest in stored.items()
               if path in now and path != SALT and not _same(digest, salt, path, now[path])]
    removed = [f"{path} (removed)" for path in stored if path not in now and path != SALT]
    added = [f"{path} (added)" for path in now if path not in stored]
    return changed + removed + added


def unverifiable(stored: dict[str, str]) -> list[str]:
    """The paths whose secrets a comparison here cannot check: keyed with another key than this machine's."""
    return [path for path, digest in stored.items() if digest.count(".") == 2 and digest.split(".")[1] != key_id()]


def _same(digest: str, salt: str, path: str, value: Any) -> bool:
    now = leaf_digest(salt, path, value)
    if digest == now:
        return True
    parts, now_parts = digest.split("."), now.split(".")
    if len(parts) == 3 and len(now_parts) == 3:
        return parts[0] == now_parts[0] and parts[1] != now_parts[1]  # another machine's key: the rest only
    if len(parts) == 1 and len(now_parts) == 3:  # stored before secret-bearing leaves were keyed
        return digest == _salted(salt, path, _text(value))
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

"""Packages that add adapters and scorer kinds, installed for a test (docs/extending.md).

A package is installed when its ``NAME-VERSION.dist-info`` folder (``METADATA``, ``entry_points.txt``) sits in a
folder on ``sys.path`` beside its modules: that is what pip writes, and what ``importlib.metadata`` (so evalcli)
reads. ``installed`` writes such a folder for a package made up by a test (a broken one, say); ``demo_plugin`` does
it for the example plugin in ``tests/plugins``, with the metadata that plugin's own build backend writes when pip
installs it (``tests/test_plugins.py`` does that too). Written into the folder a CLI run starts in, which
``python -m evalcli`` puts first on ``sys.path``, they are installed for that run (and the tests' fork server can
run it).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import textwrap
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO

DEMO_PLUGIN = REPO / "tests" / "plugins" / "evalcli_demo_plugin"


def installed(folder: Path, name: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str],
              version: str = "1.0") -> Path:
    """``folder`` holding the package ``name``: its modules (path -> source, dedented) and its metadata."""
    for path, source in modules.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(textwrap.dedent(source).lstrip())
    info = folder / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in table.items()) + "\n"
        for group, table in entry_points.items()))
    return folder


def demo_backend() -> ModuleType:
    """The example plugin's build backend (``tests/plugins/evalcli_demo_plugin/build_backend.py``)."""
    spec = importlib.util.spec_from_file_location("evalcli_demo_plugin_backend", DEMO_PLUGIN / "build_backend.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_plugin(folder: Path) -> Path:
    """``folder`` holding the example plugin, installed: its packages and the metadata pip writes for it."""
    for package in ("evalcli_demo_plugin", "demo_parrot"):
        shutil.copytree(DEMO_PLUGIN / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in demo_backend().dist_info().items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


SEEING_PLUGIN = '''
import json, os

class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, plugin_settings):
        with open(os.environ["SEEN_MODELS"], "a") as f:
            f.write(json.dumps([getattr(schema_type, "__module__", "?"), getattr(schema_type, "__qualname__", "?")]) + "\\n")
        return None, None, None

plugin = Plugin()
'''
"""A pydantic plugin that writes the module and name of every model pydantic shows it to ``$SEEN_MODELS`` (a line of
JSON each): what ``seeing_plugin`` installs (docs/performance.md "Pydantic's plugins")."""


def seeing_plugin(folder: Path, source: str = SEEING_PLUGIN) -> Path:
    """``folder`` holding the distribution ``seeing-plugin``, whose ``pydantic`` entry point is ``source``'s ``plugin``."""
    return installed(folder, "seeing-plugin", {"pydantic": {"seeing": "seeing_plugin:plugin"}},
                     {"seeing_plugin.py": source})


def models_seen(path: Path) -> list[tuple[str, str]]:
    """(module, name) of each model ``seeing_plugin`` was shown, in order (none when it wrote nothing)."""
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()] if path.exists() else []

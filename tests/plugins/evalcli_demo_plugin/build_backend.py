"""A build backend (PEP 517, PEP 660) for evalcli's example plugin, so its test installs it with
``pip install --no-build-isolation --no-index`` on any machine: no setuptools or wheel needed. It builds only what
pip asks for to install (a wheel, or an editable one whose ``.pth`` points at this folder); every top-level package
folder here goes in. ``dist_info`` is also how tests make the plugin installed on a ``PYTHONPATH`` without pip.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _project(root: Path = HERE) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project


def _stem(root: Path = HERE) -> str:
    """``name-version`` as wheel file names spell them."""
    project = _project(root)
    return f"{re.sub(r'[-_.]+', '_', project['name'])}-{project['version']}"


def dist_info(root: Path = HERE) -> dict[str, str]:
    """The files of the ``NAME-VERSION.dist-info`` folder (but RECORD): what makes a package installed."""
    project = _project(root)
    folder = f"{_stem(root)}.dist-info"
    points = "".join(f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in table.items()) + "\n"
                     for group, table in project.get("entry-points", {}).items())
    return {f"{folder}/METADATA": f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
            f"{folder}/WHEEL": "Wheel-Version: 1.0\nGenerator: build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            f"{folder}/entry_points.txt": points}


def _packages(root: Path = HERE) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for package in sorted(root.iterdir())
            if (package / "__init__.py").is_file() for path in sorted(package.rglob("*.py"))}


def _wheel(directory: str, files: dict[str, bytes]) -> str:
    name = f"{_stem()}-py3-none-any.whl"
    record = f"{_stem()}.dist-info/RECORD"
    lines = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
             for path, data in files.items()]
    files = {**files, record: ("\n".join([*lines, f"{record},,"]) + "\n").encode()}
    with zipfile.ZipFile(Path(directory) / name, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return name


def _metadata(files: dict[str, str]) -> dict[str, bytes]:
    return {path: text.encode() for path, text in files.items()}


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    return _wheel(wheel_directory, {**_packages(), **_metadata(dist_info())})


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    pth = {f"{_stem()}.pth": f"{HERE}\n".encode()}
    return _wheel(wheel_directory, {**pth, **_metadata(dist_info())})

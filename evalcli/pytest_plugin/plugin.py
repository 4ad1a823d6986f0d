"""The plugin of one pytest session: its options, which files are datasets, collection errors, the summary.

Nothing here imports more than pytest, the standard library and ``session``: a session that collects no dataset
pays for nothing else (``nodes`` imports the library when a dataset file is collected).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ..dbname import db_option
from .session import LOCKS, DatasetSession, absolute_path

DATASET_SUFFIXES = (".yaml", ".yml", ".jsonl")
"""The files a command-line argument names as a dataset (an ``evalcli_datasets`` pattern chooses its own)."""
REGISTRY_NAME = "scorers.yaml"
"""A scorer registry that a pattern such as ``datasets/*.yaml`` also matches: never collected by a pattern."""


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalcli", "evalcli datasets as tests")
    group.addoption("--evalcli-db", metavar="PATH", default=None,
                    help="SQLite file the datasets' runs are stored in (default: evalcli.db in the current directory)")
    group.addoption("--evalcli-strict", action="store_true", default=False,
                    help="a dataset's ::verdict item also fails when its verdict is 'scored' (a threshold missed)")
    group.addoption("--evalcli-html", metavar="PATH", default=None,
                    help="write each dataset's run as a self-contained HTML report (PATH.<dataset>.html with several)")
    group.addoption("--evalcli-no-cache", action="store_true", default=False,
                    help="do not reuse cached judge and simulated-user replies")
    parser.addini("evalcli_datasets", type="args", default=[],
                  help="glob patterns (relative to the rootdir) of evalcli dataset files to collect as tests")


class DatasetPlugin(DatasetSession):
    """The hooks of one pytest session that plays evalcli datasets."""

    NAME = "evalcli-datasets"

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config)
        self.patterns: list[str] = list(config.getini("evalcli_datasets"))
        for pattern in self.patterns:
            if os.path.isabs(pattern):
                raise pytest.UsageError(f"evalcli_datasets: '{pattern}' is not relative to the rootdir "
                                        f"({config.rootpath}); write it like datasets/*.yaml")
        if config.getoption("evalcli_db") or config.getoption("evalcli_html"):
            self.settings  # noqa: B018 - paths given on the command line are checked before anything runs
        self._matched: set[Path] | None = None
        if self.patterns:
            self.matched()
        self._add_datasets_outside_testpaths()
        self.named = {absolute_path(self.here / arg.split("::", 1)[0]) for arg in config.args
                      if arg.split("::", 1)[0].endswith(DATASET_SUFFIXES)}
        self.other_collection_errors = 0
        self.continue_on_collection_errors = bool(config.option.continue_on_collection_errors)
        self._xdist_runs: set[str] = set()

    # which files are datasets

    def matched(self) -> set[Path]:
        """The files the ``evalcli_datasets`` patterns match (globbed once, from the rootdir); a pattern that matches
        nothing is a warning (a typo, or an inline comment, which ini files do not have)."""
        if self._matched is None:
            self._matched = set()
            for pattern in self.patterns:
                found = {absolute_path(p) for p in self.config.rootpath.glob(pattern)
                         if p.is_file() and p.name != REGISTRY_NAME}
                if not found:
                    self.config.issue_config_time_warning(pytest.PytestConfigWarning(
                        f"evalcli_datasets: '{pattern}' matches no file under {self.config.rootpath}"), stacklevel=2)
                self._matched |= found
        return self._matched

    def _add_datasets_outside_testpaths(self) -> None:
        """A bare ``pytest`` collects the ``testpaths``: datasets matched elsewhere are added to what it collects."""
        if not self.patterns or self.config.args_source != pytest.Config.ArgsSource.TESTPATHS:
            return
        roots = [absolute_path(self.here / arg) for arg in self.config.args]
        for path in sorted(self.matched()):
            if not any(path == root or root in path.parents for root in roots):
                self.config.args.append(os.path.relpath(path, self.here))

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        path = absolute_path(file_path)
        if path not in self.named and (not self.patterns or path not in self.matched()):
            return None
        from .nodes import DatasetFile

        file: pytest.Collector = DatasetFile.from_parent(parent, path=file_path, plugin=self)
        return file

    # collection errors: an invalid dataset does not stop the others

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.failed:
            return
        if report.nodeid not in self.invalid:
            self.other_collection_errors += 1
        # pytest stops before running anything after a collection error; an invalid dataset is reported and the
        # other datasets and tests still run (any other collection error keeps pytest's behaviour)
        self.config.option.continue_on_collection_errors = (self.continue_on_collection_errors
                                                            or not self.other_collection_errors)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self._xdist_runs.add(str(node.workerinput["testrunuid"]))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        lines = (getattr(node, "workeroutput", None) or {}).get("evalcli_runs")
        if lines:
            from .settings import RunLine

            self.runs.extend(RunLine(**line) for line in lines)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.close_loop()
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None and self.runs:
            from dataclasses import asdict

            workeroutput["evalcli_runs"] = [asdict(line) for line in self.runs]
        for testrunuid in self._xdist_runs:
            shutil.rmtree(Path(tempfile.gettempdir()) / LOCKS / testrunuid, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.runs:
            return
        terminalreporter.write_sep("-", "evalcli")
        for line in sorted(self.runs, key=lambda r: r.dataset):
            status = "" if line.status == "completed" else f" ({line.status})"
            terminalreporter.write_line(
                f"{line.dataset}: run {line.run_id}{status}, verdict {line.verdict} "
                f"({line.conversations} conversation{'s' if line.conversations != 1 else ''}: "
                f"{line.failed} failed, {line.errors} errored{f', {line.limited} limited' if line.limited else ''}); "
                f"evalcli show {line.run_id} ITEM{db_option(line.db)}")
            for warning in line.warnings:
                terminalreporter.write_line(f"  warning: {warning}")

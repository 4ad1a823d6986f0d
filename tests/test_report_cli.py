"""``evalcli report`` and ``run --html`` through the real CLI: what the file holds, what is refused, and
that reading a run never writes to its database."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from evalcli.reports.html.sources import score_history
from evalcli.store.store import Store
from tests.conftest import REPO, CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT
from tests.report_fixtures import run_ids, transcripts

DATASET = """
target: agents:scripted
gates:
  - excludes: FORBIDDEN
scorers:
  - mentions-sunny
  - scorer: {includes: warm}
    threshold: 0.5
data:
  - {id: good, tags: [smoke], input: "q=>sunny and warm"}
  - {id: bad, tags: [smoke, edge], input: "q=>FORBIDDEN sunny"}
  - {id: xss, input: "q=><script>alert(1)</script><img src=https://example.invalid/i.png>"}
  - id: multi
    turns:
      - input: "one=>sunny"
        scorers: [mentions-sunny]
      - input: "two=>cold"
        scorers: [mentions-sunny]
"""
OTHER = """
target: agents:scripted
scorers: [mentions-sunny]
data:
  - {id: only, input: "q=>sunny"}
"""
REGISTRY = """
scorers:
  mentions-sunny:
    includes: sunny
"""


def _project(write: Callable[..., Path]) -> None:
    write("d.yaml", DATASET)
    write("other.yaml", OTHER)
    write("scorers.yaml", REGISTRY)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_report_is_listed_in_help(cli: Callable[..., CliResult]) -> None:
    result = cli("--help")
    assert result.code == 0
    assert re.search(r"report\s+Write a self-contained HTML report of a stored run", result.stdout)
    usage = cli("report", "--help")
    assert usage.code == 0 and "--baseline" in usage.stdout and "--html" in usage.stdout


def test_run_html_holds_the_run_and_escapes_everything(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    _project(write)
    write("reports/.keep", "")  # the folder must exist, as for --db
    result = cli("run", "d.yaml", "--html", "reports/run.html")
    assert result.code == 1, result.stderr
    html = (result.cwd / "reports" / "run.html").read_text()
    run_id = run_ids(result.cwd / "evalcli.db")[0]
    assert run_id in html and "agents:scripted" in html and ">failed</span>" in html
    assert "<script>alert(1)" not in html  # escaped in the list and in the embedded JSON
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script") == 2  # the transcripts (JSON, not run) and the page's own script
    assert re.findall(r'(?:src|href)="([^"#][^"]*)"', html) == ["data:,"]  # no reference leaves the page
    assert "default-src 'none'" in html  # and the page's policy would refuse one anyway
    items = transcripts(html)
    assert [t["id"] for t in items] == ["good", "bad", "xss", "multi"]
    assert items[2]["turns"][0]["messages"] == [{"k": "text", "text": "<script>alert(1)</script><img src=https://example.invalid/i.png>"}]
    multi = items[3]["turns"][1]["outcomes"]
    assert multi == [{"role": "scorer", "id": "mentions-sunny", "score": "0", "threshold": None, "passed": None,
                      "reason": "'sunny' not found in \"cold\""}]
    bad = items[1]["outcomes"][0]
    assert bad["role"] == "gate" and bad["passed"] is False and "FORBIDDEN" in bad["reason"]


def _as_a_plain_user() -> list[str]:
    """A command prefix under which file permissions hold: as root, drop the capabilities that override them."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to test read-only files as root"
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}", "--"]


def test_report_reads_a_read_only_database_without_touching_it(write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    _project(write)
    folder = write("store/.keep", "").parent
    assert cli("run", "d.yaml", "--db", "store/runs.db", "-q").code == 1
    before = _digest(folder)
    os.chmod(folder / "runs.db", 0o444)
    os.chmod(folder, 0o555)
    try:
        command = [*_as_a_plain_user(), sys.executable, "-m", "evalcli", "report", "latest", "--db", "store/runs.db",
                   "--html", "out.html"]
        done = subprocess.run(command, cwd=folder.parent, env={**os.environ, "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("wrote out.html: run ") and "4 conversations" in done.stdout
        assert _digest(folder) == before  # no byte changed and no -wal/-shm appeared
        denied = subprocess.run([*_as_a_plain_user(), "touch", str(folder / "probe")], capture_output=True)
        assert denied.returncode != 0  # the folder really was read-only for the report
    finally:
        os.chmod(folder, 0o755)
    assert "mentions-sunny" in (folder.parent / "out.html").read_text()


def test_unknown_run_and_missing_database_are_exit_2(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    missing = cli("report", "latest", "--db", "nowhere.db", "--html", "out.html")
    assert missing.code == 2 and "no database at nowhere.db" in missing.stderr
    assert not (missing.cwd / "nowhere.db").exists() and not (missing.cwd / "out.html").exists()
    _project(write)
    assert cli("run", "d.yaml", "-q").code == 1
    unknown = cli("report", "NOPE", "--html", "out.html")
    assert unknown.code == 2 and "no run 'NOPE'" in unknown.stderr
    bad_baseline = cli("report", "latest", "--baseline", "NOPE", "--html", "out.html")
    assert bad_baseline.code == 2 and "no run 'NOPE'" in bad_baseline.stderr
    assert not (unknown.cwd / "out.html").exists()
    assert "Traceback" not in unknown.stderr + missing.stderr + bad_baseline.stderr


def test_an_unwritable_html_path_is_refused_before_anything_runs(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    _project(write)
    write("adir/x", "")
    refused = cli("run", "d.yaml", "--html", "adir")
    assert refused.code == 2 and "--html adir is a directory" in refused.stderr
    assert not (refused.cwd / "evalcli.db").exists()  # nothing was run or stored
    assert cli("run", "d.yaml", "-q").code == 1
    assert cli("report", "latest", "--html", "adir").code == 2


def test_baseline_of_another_dataset_needs_allow_different(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    _project(write)
    assert cli("run", "d.yaml", "-q").code == 1
    assert cli("run", "other.yaml", "-q").code == 0
    first, second = run_ids(write("x", "").parent / "evalcli.db")
    refused = cli("report", second, "--baseline", first, "--html", "out.html")
    assert refused.code == 2 and "--allow-different" in refused.stderr
    allowed = cli("report", second, "--baseline", first, "--html", "out.html", "--allow-different")
    assert allowed.code == 0, allowed.stderr
    html = (allowed.cwd / "out.html").read_text()
    assert "item good: in A, missing from B" in html and f"Compared with baseline <code>{first}</code>" in html


def test_several_datasets_get_one_report_each(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    _project(write)
    result = cli("run", "d.yaml", "other.yaml", "--html", "out.html", "-q")
    assert result.code == 1, result.stderr
    assert "q=&gt;FORBIDDEN sunny" in (result.cwd / "out.d.html").read_text()
    other = (result.cwd / "out.other.html").read_text()
    assert "other.yaml" in other and "FORBIDDEN" not in other


def test_header_shows_git_commit_and_history_keeps_to_the_dataset(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    _project(write)
    folder = write("x", "").parent
    git = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    for command in (["init", "-q"], ["add", "d.yaml"], ["commit", "-qm", "dataset"]):
        subprocess.run(["git", *command], cwd=folder, env=git, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True).stdout.strip()
    for dataset in ("d.yaml", "other.yaml", "d.yaml"):
        cli("run", dataset, "-q")
    assert cli("report", "latest", "--html", "out.html").code == 0
    assert commit in (folder / "out.html").read_text()
    store = Store.existing(folder / "evalcli.db")
    try:
        runs = run_ids(folder / "evalcli.db")
        history = score_history(store, store.require_run(runs[2])["dataset"], runs[2])
    finally:
        store.close()
    assert [point.run_id for point in history] == [runs[0], runs[2]]  # not the other dataset's run
    assert history[0].means == {"mentions-sunny": 0.75, "mentions-sunny (per turn)": 0.5}


def test_secrets_are_redacted_from_the_report(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    secret = 'hunter2"quoted\\slash-value'
    write("d.yaml", """
        target: agents:scripted
        scorers: [{includes: x}]
        data:
          - {id: leak, input: 'q=>the token is hunter2"quoted\\slash-value, keep it'}
        """)
    assert cli("run", "d.yaml", "-q").code == 0  # no secret known while running: stored as said
    result = cli("report", "latest", "--html", "out.html", env={"SERVICE_TOKEN": secret})
    assert result.code == 0, result.stderr
    html = (result.cwd / "out.html").read_text()
    assert "hunter2" not in html
    assert transcripts(html)[0]["turns"][0]["messages"][0]["text"] == "the token is [redacted], keep it"

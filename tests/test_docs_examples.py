"""The docs' examples cannot rot: every complete dataset in README.md and docs/ is validated by the real
``evalcli validate`` (those marked ``run`` are also run offline), every shell block marked ``sh`` is run, and
every Python block compiles. A failure names the doc file and the line of the block (tests/doc_blocks.py says
how blocks are marked)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.doc_blocks import Block, Page, pages
from tests.framework_venvs import EXTRAS, venv_or_skip
from tests.mastra_server import REQUIRE, MastraServer, Unavailable, ensure_installed, node_missing
from tests.plugin_packages import demo_plugin

PAGES = pages()
DATASETS = [(page, block) for page in PAGES for block in page.blocks if block.dataset is not None]
SHELL = [(page, block) for page in PAGES for block in page.blocks if block.kind == "sh"]
COPIED = ("datasets", "examples", "scorers.yaml")
"""What every example's folder holds, as in a checkout of the repository (the page's own files are added)."""


def where(case: tuple[Page, Block]) -> str:
    return case[1].where


def workspace(tmp_path: Path, page: Page, block: Block) -> Path:
    """A folder with the repository's datasets, examples and registry, then the page's files before ``block``."""
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, tmp_path / name)
    for name, text in page.files_before(block).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def unavailable(why: str) -> None:
    if os.environ.get(REQUIRE):
        pytest.fail(f"{REQUIRE} is set but the Mastra server cannot run: {why}")
    pytest.skip(f"the Mastra server needs Node: {why}")


@pytest.fixture(scope="session")
def mastra_url() -> Iterator[str]:
    why = node_missing()
    if why:
        unavailable(why)
    try:
        with MastraServer() as server:
            yield server.url
    except Unavailable as exc:
        unavailable(str(exc))


FRAMEWORK_NEEDS = {"google_adk": "google.adk"}
"""Needs that are a framework's module: optional extras, which a test environment may leave out."""


def venv_python(block: Block) -> Path | None:
    """The interpreter of the venv the example needs (a need named after an extra whose pins clash with the suite's,
    tests/framework_venvs.py; built once), or ``None`` for the test Python."""
    extra = next((need for need in EXTRAS if need in block.needs), None)
    return venv_or_skip(extra) if extra else None


def needs(block: Block, request: pytest.FixtureRequest, folder: Path) -> dict[str, str]:
    env = {}
    for need, module in FRAMEWORK_NEEDS.items():
        if need in block.needs:
            try:
                import importlib.util

                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if not found:
                pytest.skip(f"{module} is not installed (pip install 'evalcli[{need.replace('_', '-')}]')")
    if "demo_plugin" in block.needs:
        demo_plugin(folder)  # installed in the folder the example runs in
    if "mastra" in block.needs:
        if block.kind == "sh":
            why = node_missing()
            if why:
                unavailable(why)
            try:
                ensure_installed()
            except Unavailable as exc:
                unavailable(str(exc))
        else:
            env["MASTRA_URL"] = request.getfixturevalue("mastra_url")
    return env


def output(result: CliResult, name: str, block: Block) -> str:
    """The command's output, each ``NAME:LINE`` of the example also named as the line of the doc it stands on."""
    doc = block.doc.relative_to(REPO)
    text = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    return re.sub(rf"{re.escape(name)}:(\d+)", lambda m: f"{m[0]} [{doc}:{block.line + int(m[1])}]", text)


@pytest.mark.parametrize("case", DATASETS, ids=[where(c) for c in DATASETS])
def test_dataset_example(case: tuple[Page, Block], tmp_path: Path, request: pytest.FixtureRequest) -> None:
    page, block = case
    folder = workspace(tmp_path, page, block)
    name = block.file or "doc-example.yaml"
    (folder / name).write_text(block.text, encoding="utf-8")
    env = needs(block, request, folder)
    command = "run" if block.kind == "run" else "validate"  # a run validates the dataset first (exit 2 if not)
    done = run_cli([command, name], folder, env, python=venv_python(block))
    assert done.code == block.exit, (f"{block.where}: evalcli {command} {name} exited {done.code}, expected "
                                     f"{block.exit}{output(done, name, block)}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


WAIT = """__wait_port() {
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing listens on 127.0.0.1:$1 after 60 s" >&2; return 1
}
"""


def runnable(script: str) -> str:
    """The script on free ports (every ``--port N`` and ``:N`` of it), waiting for each server it starts in the
    background (a line ending in ``&``) to listen before going on."""
    for port in sorted(set(re.findall(r"--port (\d{2,5})\b", script))):
        script = re.sub(rf"(--port |:){port}\b", rf"\g<1>{free_port()}", script)
    lines = []
    for line in script.splitlines():
        lines.append(line)
        started = re.search(r"--port (\d+)\b.*&\s*$", line)
        if started:
            lines.append(f"__wait_port {started[1]}")
    return WAIT + "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", SHELL, ids=[where(c) for c in SHELL])
def test_shell_example(case: tuple[Page, Block], tmp_path: Path, request: pytest.FixtureRequest) -> None:
    page, block = case
    folder = workspace(tmp_path / "work", page, block)
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           **needs(block, request, folder)}
    for name in ("EVALCLI_JUDGE_MODEL", "EVALCLI_SIMULATOR_MODEL", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    python = venv_python(block)
    if python is not None:  # the script's `python` is the venv's
        env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        # files, not pipes: a server left in the background must not keep the test waiting for its output
        process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", runnable(block.text)], cwd=folder, env=env,
                                   stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = process.wait(timeout=300)
        finally:
            try:
                os.killpg(process.pid, signal.SIGTERM)  # the servers the script started, with it
            except ProcessLookupError:
                pass
    assert code == block.exit, (f"{block.where}: the shell example exited {code}, expected {block.exit}\n--- script\n"
                                f"{block.text}--- stdout\n{out.read_text()}\n--- stderr\n{err.read_text()}")


def test_python_blocks_compile() -> None:
    wrong = []
    for page in PAGES:
        for block in page.blocks:
            if block.lang == "python":
                try:
                    compile(block.text, block.where, "exec")
                except SyntaxError as exc:
                    wrong.append(f"{block.where}: {exc}")
    assert not wrong, "\n".join(wrong)


def test_markers_are_known_and_stand_before_a_block() -> None:
    wrong = [f"{page.doc.relative_to(REPO)}:{line}: a marker not followed by a ``` block" for page in PAGES
             for line in page.stray_markers]
    wrong += [f"{block.where}: {problem}" for page in PAGES for block in page.blocks for problem in block.problems()]
    assert not wrong, "\n".join(wrong)


IMPORTS = (("pydantic_ai", "pydantic_ai"), ("agents", "openai_agents"), ("langgraph", "langgraph"),
           ("langchain", "langgraph"), ("smolagents", "smolagents"), ("llama_index", "llama_index"))


def kind_of(target: object, files: dict[str, str]) -> str:
    """What kind of agent a dataset's target is: a mapping form, or what its module imports."""
    if isinstance(target, dict):
        return next((form for form in ("http", "mastra", "model") if form in target), "mapping")
    module = str(target).split(":", 1)[0].replace(".", "/") + ".py"
    source = files.get(module) or ((REPO / module).read_text(encoding="utf-8") if (REPO / module).is_file() else "")
    if re.search(r"^from evalcli(\.agent)? import .*\bAgent\b", source, re.M):
        return "agent"
    return next((kind for package, kind in IMPORTS if re.search(rf"^(from|import) {package}\b", source, re.M)),
                "callable")


def test_every_target_kind_and_feature_page_has_a_tested_example() -> None:
    kinds = {kind_of(block.dataset.get("target"), page.files_before(block)) for page, block in DATASETS
             if block.dataset and "target" in block.dataset}
    assert {"callable", "agent", "pydantic_ai", "openai_agents", "langgraph", "smolagents", "llama_index", "http", "mastra",
            "model"} <= kinds, kinds
    tested = {page.doc.relative_to(REPO).as_posix() for page, _ in DATASETS + SHELL}
    features = ["README.md", "docs/tutorial.md", "docs/datasets.md", "docs/targets/python.md",
                "docs/targets/frameworks.md", "docs/targets/smolagents.md", "docs/targets/llama-index.md",
                "docs/targets/strands.md",
                "docs/targets/http.md", "docs/targets/mastra.md", "docs/targets/model.md",
                "docs/scorers.md", "docs/checks.md", "docs/judges.md", "docs/simulated-users.md", "docs/recorded.md",
                "docs/ci.md", "docs/pytest.md", "docs/history.md", "docs/html-report.md", "docs/storage.md",
                "docs/python-api.md", "docs/reference/exit-codes.md"]
    assert not [page for page in features if page not in tested]


def test_job_runner_examples_are_what_their_runners_accept() -> None:
    """The CI pages' YAML (a GitHub workflow, a Kubernetes Job) is YAML, and a Slurm batch script opens with its
    ``#!`` line (``sbatch`` refuses a script whose first line is anything else, a comment naming the file included)."""
    import yaml

    blocks = [block for page in PAGES for block in page.blocks if block.doc.name in ("ci.md", "pytest.md")]
    for block in blocks:
        if block.lang == "yaml":
            assert isinstance(yaml.safe_load(block.text), dict), block.where
        if "#SBATCH" in block.text:
            assert block.text.lstrip("\n").startswith("#!"), f"{block.where}: a batch script's first line is its #!"
    assert any("#SBATCH" in block.text for block in blocks)


def test_the_tutorials_registry_registers_what_its_dataset_uses(tmp_path: Path) -> None:
    """The tutorial's section 4 says its `scorers.yaml` registers the lines `validate` printed: after it, the
    dataset's runs warn of nothing (it registered `no-tool-errors` beside a bare `no_tool_errors`, another id)."""
    (page,) = [page for page in PAGES if page.doc.name == "tutorial.md"]
    for block in page.blocks:
        if block.options.get("file") in ("refunds.yaml", "refund_agent.py", "scorers.yaml"):
            (tmp_path / block.options["file"]).write_text(block.text)
    result = run_cli(["validate", "refunds.yaml"], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert result.code == 0 and "not registered" not in result.stdout + result.stderr, result.stdout

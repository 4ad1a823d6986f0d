"""A test's time limit holds on a busy machine (docs/development.md): a subprocess a test runs to the end gets
``SUBPROCESS_TIMEOUT``, which only ever stops a hang. A test in the parallel pass may not give one a shorter limit
(the litellm run of ``test_secrets.py`` was killed by a 60 s one at load 13); a test whose point is how long
something takes is marked ``timing`` and runs alone, after the parallel pass."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.reliability_helpers import SUBPROCESS_TIMEOUT

TESTS = Path(__file__).resolve().parent
WAITS = {"run", "run_cli", "communicate", "check_output", "check_call", "call"}
"""Calls that run a subprocess to its end (``subprocess.run``, ``run_cli``, ``Popen.communicate``...)."""


def _is_timing(decorators: list[ast.expr]) -> bool:
    return any("timing" in ast.unparse(d) for d in decorators)


def _expects_a_timeout(node: ast.With) -> bool:
    """``with pytest.raises(subprocess.TimeoutExpired):``: a short limit is the point of the test."""
    return any("TimeoutExpired" in ast.unparse(item.context_expr) for item in node.items)


def tight_limits(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, code) of each subprocess given less than ``SUBPROCESS_TIMEOUT`` (to end, or as a deadline for its
    progress: ``time.monotonic() + N``) outside a ``timing`` test."""
    if any(isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n) and "timing" in ast.unparse(n.value)
           for n in tree.body):
        return []
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_timing(node.decorator_list):
                return
            arguments = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
            for argument, default in zip(arguments, defaults, strict=True):
                if (node.name in WAITS and argument.arg == "timeout" and isinstance(default, ast.Constant)
                        and isinstance(default.value, (int, float)) and default.value < SUBPROCESS_TIMEOUT):
                    found.append((node.lineno, f"def {node.name}(... timeout={default.value})"))
        if isinstance(node, ast.With) and _expects_a_timeout(node):
            return
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and ast.unparse(node.left).endswith("monotonic()")
                and isinstance(node.right, ast.Constant) and isinstance(node.right.value, (int, float))
                and node.right.value < SUBPROCESS_TIMEOUT):  # a deadline for a subprocess's progress
            found.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for keyword in node.keywords:
                if (name in WAITS and keyword.arg == "timeout" and isinstance(keyword.value, ast.Constant)
                        and isinstance(keyword.value.value, (int, float)) and keyword.value.value < SUBPROCESS_TIMEOUT):
                    found.append((node.lineno, ast.unparse(node)[:100]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_test_in_the_parallel_pass_gives_a_subprocess_a_tight_time_limit() -> None:
    found = [f"tests/{path.name}:{line}: {code}" for path in sorted(TESTS.glob("*.py"))
             for line, code in tight_limits(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, ("a limit that fails on a busy machine: use SUBPROCESS_TIMEOUT (tests/reliability_helpers.py), "
                       "or mark the test timing\n" + "\n".join(found))


def test_the_check_finds_a_tight_limit() -> None:
    source = ("import subprocess, pytest\n"
              "def run_cli(args, timeout: float = 60): ...\n"
              "def test_a(proc):\n    proc.communicate(timeout=60)\n"
              "@pytest.mark.timing\ndef test_b(proc):\n    proc.communicate(timeout=5)\n"
              "def test_c():\n    with pytest.raises(subprocess.TimeoutExpired):\n        run_cli([], timeout=3)\n"
              "def test_d():\n    deadline = time.monotonic() + 30\n")
    assert [line for line, _ in tight_limits(ast.parse(source))] == [2, 4, 12]

"""SPEC §22's edges outside the targets: a JSONL data file with a byte-order mark, a judge on an OpenAI-compatible
route that never imports litellm, and a second SIGTERM while the last reports are written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult


def test_a_jsonl_data_file_with_a_byte_order_mark_is_read(write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers: [{includes: a}]
        data_file: items.jsonl
        """)
    (write("x", "").parent / "items.jsonl").write_bytes(
        "\ufeff".encode() + b'{"id": "first", "input": "a"}\n{"id": "second", "input": "b"}\n')
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [i["id"] for i in result.json["items"]] == ["first", "second"]

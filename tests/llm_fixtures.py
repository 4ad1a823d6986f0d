"""Pytest fixtures for the LLM layer: a scripted OpenAI-compatible server on loopback.

Load with ``pytest_plugins = ["tests.llm_fixtures"]`` (in ``tests/conftest.py``) or by importing
the fixtures into a test module.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_server import LLMServer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


LLM_BACKENDS = {"direct": "auto", "litellm": "litellm"}
"""The two ways evalcli calls an OpenAI-compatible model (docs/models.md): its own Chat Completions client (the
default), and litellm (``EVALCLI_LLM_BACKEND=litellm``)."""


@pytest.fixture(params=list(LLM_BACKENDS))
def llm_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once per backend (``EVALCLI_LLM_BACKEND``, inherited by the CLI subprocesses it starts)."""
    monkeypatch.setenv("EVALCLI_LLM_BACKEND", LLM_BACKENDS[request.param])
    return str(request.param)


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    """A started scripted server; ``OPENAI_API_KEY`` is a fake test key, proxies are bypassed."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0123456789")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = LLMServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llm_cache_path(tmp_path: Path) -> str:
    """A path for a fresh response-cache database."""
    return str(tmp_path / "cache.db")

"""What a model accepts as a response format (docs/models.md): read from litellm's model table, without importing
litellm for the OpenAI-compatible models, whose answers are the same (``tests/test_llm_backends.py``)."""

from __future__ import annotations

from .local_model import is_local
from .settings import backend_from_env


def supports_json_schema(model: str) -> bool:
    """Whether the model takes a ``json_schema`` response format (per litellm's model table)."""
    if is_local(model):
        return True
    if backend_from_env() != "litellm" and _table_answers(model):
        from . import catalog

        return catalog.supports_json_schema(model)
    from . import litellm_backend

    return litellm_backend.supports_json_schema(model)


def supports_json_mode(model: str) -> bool:
    """Whether the provider accepts ``response_format`` at all (``json_object`` mode)."""
    if backend_from_env() != "litellm" and _table_answers(model):
        from . import catalog

        return catalog.supports_json_mode(model)
    from . import litellm_backend

    return litellm_backend.supports_json_mode(model)


def _table_answers(model: str) -> bool:
    """OpenAI-compatible models: their capabilities are read from litellm's table without importing litellm
    (the same answers: ``tests/test_llm_backends.py``)."""
    from .openai_compat import speaks_openai

    return speaks_openai(model)

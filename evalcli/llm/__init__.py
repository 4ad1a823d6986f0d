"""Every LLM call in evalcli (docs/judges.md, docs/simulated-users.md, docs/models.md): the client with retries and usage
records (``client``), its
three paths (``openai_compat``: Chat Completions over a pooled aiohttp session; ``local_model``: the embedded
model in-process; ``litellm_backend``: every other provider), litellm's price and capability table read as
data (``catalog``), the response cache, fencing of untrusted text and model preflight.

``litellm_backend`` is the only module that imports litellm, and only inside functions, so importing this
package (and ``evalcli --help``, check-only runs, and runs whose models are all OpenAI-compatible) never pays
for it or reaches for the network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .budget import PURPOSES, Budget, check_cost_budget, check_limit_prices, dollars, parse_budget, purpose_group
    from .cache import ResponseCache
    from .capabilities import supports_json_mode, supports_json_schema
    from .catalog import price_of
    from .client import BudgetSpent, LLMClient, LLMError, content_text, import_litellm, provider_messages, reply_refusal, reply_text
    from .fields import ApiBase
    from .local_model import pending as local_model_pending
    from .local_model import preload as load_local_model
    from .preflight import LOCAL_JUDGE_MODEL, check_settings, default_judge_model, model_problem, settings_problems
    from .settings import LLMSettings, backend_from_env, import_http_client
    from .usage import CallRecord, UsageSink, current_usage, uncounted_warning, usage_rows, usage_summary

# Each name is imported from its module when first used: `evalcli validate` asks for the preflight's checks only, and
# so never imports the client, its asyncio and ssl, or the response cache's sqlite3 (docs/performance.md "Start-up and
# finish").
_exports = lazy_exports(__name__, {
    ".budget": ("PURPOSES", "Budget", "check_cost_budget", "check_limit_prices", "dollars", "parse_budget", "purpose_group"),
    ".cache": ("ResponseCache",),
    ".capabilities": ("supports_json_mode", "supports_json_schema"),
    ".catalog": ("price_of",),
    ".fields": ("ApiBase",),
    ".client": ("BudgetSpent", "LLMClient", "LLMError", "content_text", "import_litellm", "provider_messages", "reply_refusal",
                "reply_text"),
    ".preflight": ("LOCAL_JUDGE_MODEL", "check_settings", "default_judge_model", "model_problem", "settings_problems"),
    ".settings": ("LLMSettings", "backend_from_env", "import_http_client"),
    ".usage": ("CallRecord", "UsageSink", "current_usage", "uncounted_warning", "usage_rows", "usage_summary"),
})
_RENAMED = {"local_model_pending": "pending", "load_local_model": "preload"}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        from . import local_model

        return getattr(local_model, _RENAMED[name])
    return _exports(name)


__all__ = [
    "LOCAL_JUDGE_MODEL", "PURPOSES", "ApiBase", "Budget", "BudgetSpent", "CallRecord", "LLMClient", "LLMError",
    "LLMSettings", "ResponseCache", "UsageSink", "backend_from_env", "check_cost_budget", "check_limit_prices",
    "check_settings", "content_text", "current_usage",
    "default_judge_model", "dollars", "import_http_client", "import_litellm", "load_local_model", "local_model_pending",
    "model_problem", "parse_budget", "price_of", "provider_messages", "purpose_group", "reply_refusal", "reply_text",
    "settings_problems",
    "supports_json_mode", "supports_json_schema", "uncounted_warning", "usage_rows", "usage_summary",
]

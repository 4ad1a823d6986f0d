"""litellm's bundled model table, read as data without importing litellm (docs/models.md): prices, and the few
capabilities the OpenAI-compatible path needs (which models OpenAI serves, JSON-schema and JSON-mode support,
the reasoning models' parameter rules).

The table is ``model_prices_and_context_window_backup.json`` in the installed litellm package, the same file
litellm reads with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (which evalcli always sets): it is located with
``importlib.util.find_spec`` and parsed once per process, on the first OpenAI-compatible call. Lookups follow
litellm's own order (provider-prefixed name, name, the name without a dated suffix or a fine-tune's org/id,
case-insensitively, then the table's capability rules), so both paths price a call and choose a
``response_format`` alike; ``tests/test_llm_backends.py`` compares them over the whole table. Without litellm
installed the table is empty: every model is unpriced (cost 0, as litellm records unknown models).
"""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from dataclasses import field
from pathlib import Path
from typing import Any

from ..records import record

TABLE_FILE = "model_prices_and_context_window_backup.json"
OPENAI = "openai"
HOSTED_VLLM = "hosted_vllm"
_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_FINE_TUNE_TAIL = re.compile(r"(:[^:]*){3}$")
_THRESHOLD = re.compile(r"^input_cost_per_token_above_(\d+(?:\.\d+)?)(k?)_tokens$")
_TIER_SUFFIX = {"flex": "flex", "priority": "priority", "balanced": "balanced", "fast": "fast",
                "ultrafast": "ultrafast"}
_REGIONAL_HOSTS = {"eu.api.openai.com": "eu", "us.api.openai.com": "us", "gov.api.openai.com": "fedramp"}
_BACKFILL_MODES = ("chat", "responses")


@record
class Table:
    """The parsed table, with the indexes lookups need."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    lower: dict[str, str] = field(default_factory=dict)
    capability_rules: list[tuple[re.Pattern[str], dict[str, Any], frozenset[str]]] = field(default_factory=list)
    routing_rules: list[re.Pattern[str]] = field(default_factory=list)
    """Patterns of bare names litellm sends to a provider of its choosing (``claude-...`` to Anthropic)."""
    openai_models: frozenset[str] = frozenset()
    """litellm's ``open_ai_chat_completion_models``: every OpenAI entry but the bare ``ft:<base>`` price rows."""
    declares_default_effort: bool = False
    priced_by: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """``price_of``'s entry for each model name asked so far (the table never changes once read)."""

    def key(self, name: str) -> str | None:
        """The table's key for ``name``, matched exactly, else case-insensitively."""
        if name in self.models:
            return name
        return self.lower.get(name.lower())


_lock = threading.Lock()
_table: Table | None = None


def table_path() -> Path | None:
    """The bundled table of the installed litellm package (found without importing it), if any."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / TABLE_FILE
        if path.is_file():
            return path
    return None


def table() -> Table:
    """The table, parsed on first use (an empty one when litellm is not installed)."""
    global _table
    with _lock:
        if _table is None:
            path = table_path()
            _table = _build(json.loads(path.read_bytes())) if path else Table()
        return _table


def _build(raw: dict[str, Any]) -> Table:
    models = {k: v for k, v in raw.items() if isinstance(v, dict) and k not in ("sample_spec", "fallback_generalizations")}
    rules, routing = [], []
    for rule in (raw.get("fallback_generalizations") or {}).get("rules") or []:
        info, pattern = rule.get("model_info"), rule.get("pattern")
        if not isinstance(info, dict) or not isinstance(pattern, str) or "extends" in rule:
            continue
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error:
            continue
        if "litellm_provider" in info:
            routing.append(compiled)  # routing rules say nothing about a model's capabilities or price
        else:
            rules.append((compiled, info, frozenset(rule.get("fill_missing_for_providers") or ())))
    openai = frozenset(k for k, v in models.items() if v.get("litellm_provider") == OPENAI
                       and not (k.startswith("ft:") and k.count(":") == 1))
    return Table(models, {k.lower(): k for k in models}, rules, routing, openai,
                 any("default_reasoning_effort" in v for v in models.values()))


def _stripped(name: str) -> str:
    return _FINE_TUNE_TAIL.sub("", name) if "ft:" in name else _DATED_SUFFIX.sub("", name)


def _candidates(name: str, provider: str) -> list[str]:
    stripped = _stripped(name)
    return [f"{provider}/{name}", name, f"{provider}/{stripped}", stripped]


def model_info(name: str, provider: str) -> dict[str, Any] | None:
    """What the table says of model ``name`` (no provider prefix) at ``provider``, as litellm's ``get_model_info``
    resolves it; ``None`` when it is not mapped."""
    data = table()
    candidates = _candidates(name, provider)
    known = False
    for candidate in candidates:
        key = data.key(candidate)
        if key is None:
            continue
        known = True
        entry = data.models[key]
        if entry.get("litellm_provider") not in (None, provider):
            continue
        if entry.get("mode", "chat") in _BACKFILL_MODES and isinstance(entry.get("litellm_provider", ""), str):
            fill = [info for pattern, info, providers in data.capability_rules
                    if entry.get("litellm_provider") in providers and pattern.search(key)]
            if fill:
                return {**{k: v for info in fill for k, v in info.items() if k not in entry}, **entry}
        return entry
    if known:
        return None  # a name the table knows under another provider is not generalised
    for candidate in candidates:
        matched = [info for pattern, info, _ in data.capability_rules if pattern.search(candidate)]
        if matched:
            return {**{k: v for info in matched for k, v in info.items()}, "litellm_provider": provider}
    return None


def is_openai_model(name: str) -> bool:
    """Whether litellm sends a bare model name (no provider prefix) to OpenAI."""
    return (name in table().openai_models or "ft:gpt-3.5-turbo" in name or "ft:gpt-4" in name
            or name.startswith("gpt-image"))


def routed_elsewhere(model: str) -> bool:
    """Whether litellm's routing rules send this bare name to some provider (``claude-haiku-9`` to Anthropic)."""
    return any(pattern.search(model) for pattern in table().routing_rules)


def provider_and_name(model: str) -> tuple[str, str] | None:
    """(provider, name) for the OpenAI-compatible providers evalcli speaks to itself, as litellm resolves them."""
    provider, _, name = model.partition("/")
    if name and provider in (OPENAI, HOSTED_VLLM):
        return provider, name
    if ("/" not in model or model in table().openai_models) and is_openai_model(model):
        return OPENAI, model
    return None


def supports(name: str, key: str) -> bool:
    """litellm's ``supports_<capability>`` for an OpenAI model (``supports_system_messages``, ...)."""
    return _supports(name, OPENAI, key)


def _supports(name: str, provider: str, key: str) -> bool:
    info = model_info(name, provider)
    if info is None:
        return False
    if info.get(key) is True:
        return True
    if info.get(key) is None:
        bare = table().key(name)
        return bool(bare and table().models[bare].get(key) is True)
    return False


def supports_json_schema(model: str) -> bool:
    """litellm's ``supports_response_schema(model)`` for an OpenAI-compatible model."""
    resolved = provider_and_name(model)
    return resolved is not None and _supports(resolved[1], resolved[0], "supports_response_schema")


def is_o_series(name: str) -> bool:
    last = name.split("/")[-1]
    return len(last) > 1 and last[0] == "o" and last[1].isdigit() and last in table().openai_models


def is_gpt5_series(name: str) -> bool:
    return ("gpt-5" in name or "gpt-6" in name) and "gpt-5-chat" not in name.split("/")[-1]


def supports_json_mode(model: str) -> bool:
    """Whether litellm passes ``response_format`` on for an OpenAI-compatible model (``json_object`` mode)."""
    resolved = provider_and_name(model)
    if resolved is None:
        return False
    provider, name = resolved
    if provider == HOSTED_VLLM:
        return True
    if is_o_series(model):
        return _supports(name, OPENAI, "supports_response_schema")
    if is_gpt5_series(model):
        return True
    return model not in ("gpt-3.5-turbo-16k", "gpt-4")


def declared(name: str, key: str) -> Any:
    """A value the table states for an OpenAI model (``None`` when it says nothing)."""
    info = model_info(name, OPENAI)
    return None if info is None else info.get(key)


def catalogue_declares_default_effort() -> bool:
    return table().declares_default_effort


# -- prices --------------------------------------------------------------------------------------------


def _priced(info: dict[str, Any] | None) -> bool:
    return info is not None and any(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                    for k, v in info.items() if "cost" in k)


def pricing_info(requested: str, served: str | None, provider: str) -> dict[str, Any] | None:
    """The table entry a response is priced by: the model that answered when the table prices it, else the
    model asked for (litellm's choice); ``None`` when neither is priced."""
    asked = model_info(requested, provider)
    if served and served != requested and served != f"{provider}/{requested}":
        served_name = served.split("/", 1)[1] if served.startswith(f"{provider}/") else served
        answered = model_info(served_name, provider)
        if _priced(answered):
            return answered
    return asked if _priced(asked) else None


def data_residency(provider: str, api_base: str | None) -> str | None:
    """OpenAI's regional processing, named by the host the call went to (``eu.api.openai.com``, ...)."""
    if provider != OPENAI or not api_base:
        return None
    from urllib.parse import urlparse

    try:
        host = urlparse(api_base).hostname
    except ValueError:
        return None
    return _REGIONAL_HOSTS.get((host or "").lower())


def cost(info: dict[str, Any], usage: dict[str, Any], service_tier: Any = None, residency: str | None = None) -> float:
    """The price of one response's ``usage`` at the entry's rates, summed as litellm sums it: uncached,
    cached and audio prompt tokens, then text, reasoning and audio completion tokens; the service tier's
    rates (``_flex``, ``_priority``) and the long-context tier (``_above_272k_tokens``) where the entry
    has them, and the regional uplift of OpenAI's data-residency hosts."""
    prompt_tokens = _count(usage.get("prompt_tokens"))
    completion_tokens = _count(usage.get("completion_tokens"))
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    suffix = _TIER_SUFFIX.get(str(service_tier).lower()) if isinstance(service_tier, str) else None

    def rate(key: str, default: float | None) -> float | None:
        value = info.get(f"{key}_{suffix}") if suffix else None
        value = info.get(key) if value is None else value
        return float(value) if isinstance(value, (int, float)) else default

    input_rate = rate("input_cost_per_token", 0.0) or 0.0
    output_rate = rate("output_cost_per_token", 0.0) or 0.0
    cache_read = rate("cache_read_input_token_cost", None)
    for threshold, key in _thresholds(info):
        if prompt_tokens > threshold:
            above = key.removeprefix("input_cost_per_token")
            input_rate = rate(f"input_cost_per_token{above}", input_rate) or 0.0
            output_rate = rate(f"output_cost_per_token{above}", output_rate) or 0.0
            cache_read = rate(f"cache_read_input_token_cost{above}", cache_read)
    cached = _count(prompt_details.get("cached_tokens"))
    audio_in = _count(prompt_details.get("audio_tokens"))
    text_in = prompt_tokens - cached - audio_in if cached or audio_in else prompt_tokens
    if cached and text_in < 0:
        text_in = max(prompt_tokens - cached, 0)
    prompt_cost = float(text_in) * input_rate
    if cached:
        prompt_cost += float(cached) * (input_rate if cache_read is None else cache_read)
    if audio_in:
        prompt_cost += float(audio_in) * (rate("input_cost_per_audio_token", None) or input_rate)
    reasoning = _count(completion_details.get("reasoning_tokens"))
    audio_out = _count(completion_details.get("audio_tokens"))
    text_out = _count(completion_details.get("text_tokens"))
    breakdown = reasoning > 0 or audio_out > 0
    if text_out == 0:
        text_out = max(0, completion_tokens - reasoning - audio_out) if breakdown else completion_tokens
    completion_cost = float(text_out) * output_rate
    if breakdown and audio_out:
        completion_cost += float(audio_out) * (rate("output_cost_per_audio_token", None) or output_rate)
    if breakdown and reasoning:
        completion_cost += float(reasoning) * (rate("output_cost_per_reasoning_token", None) or output_rate)
    uplift = 1.0
    if residency in ("eu", "us"):
        uplift = float(info.get(f"regional_processing_uplift_multiplier_{residency}") or 1.0)
    elif residency == "fedramp":
        uplift = float(info.get("fedramp_uplift_multiplier") or 1.0)
    if uplift != 1.0:
        prompt_cost *= uplift
        completion_cost *= uplift
    return prompt_cost + completion_cost


_threshold_keys: dict[int, tuple[dict[str, Any], list[tuple[float, str]]]] = {}


def _thresholds(info: dict[str, Any]) -> list[tuple[float, str]]:
    """The entry's long-context price tiers (``input_cost_per_token_above_272k_tokens``...), lowest first."""
    found = _threshold_keys.get(id(info))
    if found is None or found[0] is not info:
        found = _threshold_keys[id(info)] = (info, sorted((_threshold(k), k) for k in info if _THRESHOLD.match(k)))
    return found[1]


def _threshold(key: str) -> float:
    match = _THRESHOLD.match(key)
    assert match is not None
    return float(match.group(1)) * (1000 if match.group(2) else 1)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def price_of(model: str, usage: dict[str, Any]) -> float:
    """What one call of ``model`` with this ``usage`` costs at litellm's rates, for calls evalcli did not make
    itself (a framework agent's: docs/targets/index.md); 0 for a model the table does not price (or does not know)."""
    known = table().priced_by
    if model in known:
        info = known[model]
    else:  # looked up once per model: a framework agent's calls are priced on every turn
        resolved = provider_and_name(model)
        provider, name = resolved if resolved is not None else (OPENAI, model)
        info = known[model] = pricing_info(name, None, provider)
    return cost(info, usage) if info is not None else 0.0


def priced(model: str) -> bool:
    """Whether the table prices ``model`` (a litellm model string), resolved as a call to it is priced: an
    OpenAI-compatible one by its provider and name, any other by its ``provider/`` prefix or its bare name."""
    resolved = provider_and_name(model)
    if resolved is not None:
        return pricing_info(resolved[1], None, resolved[0]) is not None
    provider, _, name = model.partition("/")
    if name:
        return _priced(model_info(name, provider))
    key = table().key(model)
    return key is not None and _priced(table().models[key])

"""The litellm path (docs/models.md): every provider evalcli does not speak to itself, and every call under
``EVALCLI_LLM_BACKEND=litellm``. The only module (with ``local_model``'s registration) that imports litellm,
and only inside functions, so runs that never take this path never pay for it.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from ..errors import describe

_import_lock = threading.Lock()
_PREFIXES = re.compile(r"litellm\.\w+: ")
_PROVIDER_EXCEPTION = re.compile(r"^\w+Exception - ")
_ZERO_PRICE = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}


def import_litellm() -> Any:
    """litellm, imported on first use with the local cost map and the embedded local model registered."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with _import_lock:
        import litellm

        if not getattr(litellm, "_evalcli_ready", False):
            from .local_model import register

            litellm.suppress_debug_info = True
            litellm.telemetry = False
            register(litellm)
            litellm._evalcli_ready = True
    return litellm


async def acompletion(kwargs: dict[str, Any], timeout: float, unpriced: set[str]) -> tuple[dict[str, Any], float]:
    """One attempt through litellm: the response as a plain dict, and its cost."""
    from .openai_compat import is_custom_name

    litellm = import_litellm()
    model = str(kwargs["model"])
    if model in unpriced:
        # litellm prices every response while returning it; for a model it has no price for, that
        # fails (and formats a traceback) on every call. A zero price costs nothing and changes
        # nothing: such calls are recorded at cost 0 either way, and the request is the same.
        kwargs = {**kwargs, **_ZERO_PRICE}
    if kwargs.get("api_base") and is_custom_name(model):
        kwargs = {**kwargs, "custom_llm_provider": "openai"}  # any model at an api_base speaks Chat Completions
    # evalcli retries (EVALCLI_LLM_RETRIES, docs/models.md): neither litellm (num_retries) nor the OpenAI client it
    # makes (max_retries, 2 by default on a dropped connection or a timeout) sends a request again by itself
    raw = await litellm.acompletion(**kwargs, num_retries=0, max_retries=0, timeout=timeout, drop_params=True)
    return _as_dict(raw), _cost(litellm, raw, model, unpriced)


def _as_dict(raw: Any) -> dict[str, Any]:
    import json

    data = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
    result: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return {k: v for k, v in result.items() if not k.startswith("_")}


def _cost(litellm: Any, raw: Any, model: str, unpriced: set[str]) -> float:
    # litellm already priced the response while returning it; pricing it again costs ~1 ms a call
    hidden = getattr(raw, "_hidden_params", None)
    stamped = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(stamped, (int, float)):
        return float(stamped)
    if model in unpriced:
        return 0.0
    try:
        return float(litellm.completion_cost(completion_response=raw) or 0.0)
    except Exception as exc:  # noqa: BLE001  # litellm does not know every price
        if isinstance(exc, getattr(litellm, "ModelNotMappedError", ())) or "isn't mapped" in str(exc):
            unpriced.add(model)
        return 0.0


def supports_json_schema(model: str) -> bool:
    """litellm's answer: does the model take a ``json_schema`` response format."""
    try:
        return bool(import_litellm().supports_response_schema(model=model))
    except Exception:  # noqa: BLE001  # unknown models are simply "no"
        return False


def supports_json_mode(model: str) -> bool:
    """litellm's answer: does the provider accept ``response_format`` at all (``json_object`` mode)."""
    try:
        litellm = import_litellm()
        _, provider, _, _ = litellm.get_llm_provider(model=model)
        params = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider) or []
        return "response_format" in params
    except Exception:  # noqa: BLE001  # unknown providers are simply "no"
        return False


def describe_error(exc: BaseException, timeout: float) -> str:
    """``Kind: message`` for a litellm exception, worded as the OpenAI-compatible path words the same failure:
    litellm's repeated ``litellm.X: X: OpenAIException -`` prefixes dropped, a timeout as a timeout, a refused
    connection as ``APIConnectionError``."""
    kind = type(exc).__name__
    text = " ".join(str(exc).split())
    if not text:
        return kind
    text = _PREFIXES.sub("", text)
    for prefix in (f"{kind}: ", "Timeout Error: "):
        text = text.removeprefix(prefix)
    text = _PROVIDER_EXCEPTION.sub("", text).removeprefix("LiteLLM: ")
    if kind == "Timeout" and "timed out" in text.lower():
        return f"Timeout: request timed out after {timeout:g} s"
    if text.rstrip(".") == "Connection error":
        return "APIConnectionError: Connection error."
    return f"{kind}: {text}" if text else describe(exc)

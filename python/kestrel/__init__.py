"""Kestrel from Python: Qwen inference through the C ABI (include/kestrel.h),
the hosted library bundled (this CPU's kernels, the built-in thread pool).

    import kestrel
    model = kestrel.Model("model.vqf")
    with model.session(temperature=0) as s:
        print(s.chat("Write a haiku about rust."))          # the whole answer
        for piece in s.stream("And one about C?"):           # or piece by piece
            print(piece, end="", flush=True)
        saved = s.save_state()                               # history and KV rows
        s.set_sampling(temperature=0.7, seed=1, reseed=True) # per call, cache kept

A `Session` is one conversation (one `kestrel_engine` in its own memory);
sessions of one `Model` share its mapped bytes. Errors are `KestrelError`
subclasses named by the C status (`ArgumentError`, `ModelError`,
`ContextError`, `CancelledError`, `StateError`, ...), each with the
library's one-line message.
"""
import ctypes as C
import json
import mmap
import os
import threading
from pathlib import Path

__all__ = [
    "Model",
    "Session",
    "KestrelError",
    "ArgumentError",
    "MemoryError_",
    "ModelError",
    "TokenError",
    "OrderError",
    "ContextError",
    "BufferError_",
    "CancelledError",
    "InternalError",
    "StateError",
    "library",
]

ABI_VERSION = 1
ABI_MINOR = 1
OK, END = 0, 1


class KestrelError(Exception):
    """A call failed: `status` the C status, `message` the library's line."""

    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class ArgumentError(KestrelError, ValueError):
    status = -1


class MemoryError_(KestrelError):
    status = -2


class ModelError(KestrelError):
    status = -3


class TokenError(KestrelError, ValueError):
    status = -4


class OrderError(KestrelError):
    status = -5


class ContextError(KestrelError):
    status = -6


class BufferError_(KestrelError):
    status = -7


class CancelledError(KestrelError):
    status = -8


class InternalError(KestrelError):
    status = -9


class StateError(KestrelError, ValueError):
    status = -10


_ERRORS = {e.status: e for e in (ArgumentError, MemoryError_, ModelError, TokenError, OrderError, ContextError,
                                 BufferError_, CancelledError, InternalError, StateError)}


class _Config(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32), ("context", C.c_uint32), ("batch", C.c_uint32), ("kv_f32", C.c_uint32),
        ("text_bytes", C.c_uint32), ("draft", C.c_uint32), ("cpu_features", C.c_uint32), ("threads", C.c_uint32),
        ("parallel", C.c_void_p), ("parallel_ctx", C.c_void_p), ("temperature", C.c_float), ("top_p", C.c_float),
        ("min_p", C.c_float), ("repeat_penalty", C.c_float), ("top_k", C.c_uint32), ("repeat_last_n", C.c_uint32),
        ("seed", C.c_uint64),
    ]


class _Sampling(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32), ("temperature", C.c_float), ("top_p", C.c_float), ("min_p", C.c_float),
        ("repeat_penalty", C.c_float), ("top_k", C.c_uint32), ("repeat_last_n", C.c_uint32), ("reseed", C.c_uint32),
        ("seed", C.c_uint64),
    ]


SAMPLING_FIELDS = ("temperature", "top_p", "min_p", "repeat_penalty", "top_k", "repeat_last_n", "seed")
_TEXT_FN = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(C.c_char), C.c_size_t)
_P, _Z, _U = C.c_void_p, C.c_size_t, C.c_uint32


class _Message(C.Structure):
    _fields_ = [("role", C.c_int), ("text", C.c_char_p), ("len", C.c_size_t)]


_ROLES = {"system": 0, "user": 1, "assistant": 2, "tool": 3}
_lib = None
_lib_lock = threading.Lock()


def library():
    """The loaded C library: the bundled one, or $KESTREL_LIBRARY."""
    global _lib
    with _lib_lock:
        if _lib is None:
            path = os.environ.get("KESTREL_LIBRARY") or str(Path(__file__).with_name("libkestrel.so"))
            lib = C.CDLL(path)
            sigs = {
                "kestrel_version": (C.c_char_p, []),
                "kestrel_abi_version": (C.c_uint32, []),
                "kestrel_abi_minor": (C.c_uint32, []),
                "kestrel_config_init": (C.c_int, [C.POINTER(_Config)]),
                "kestrel_memory_size": (C.c_int, [_P, _Z, C.POINTER(_Config), C.POINTER(_Z), C.c_char_p, _Z]),
                "kestrel_open": (C.c_int, [_P, _Z, C.POINTER(_Config), _P, _Z, C.POINTER(_P), C.c_char_p, _Z]),
                "kestrel_close": (C.c_int, [_P]),
                "kestrel_error": (C.c_char_p, [_P]),
                "kestrel_status_string": (C.c_char_p, [C.c_int]),
                "kestrel_kernels": (C.c_char_p, [_P]),
                "kestrel_vocab": (C.c_uint32, [_P]),
                "kestrel_history": (C.c_int, [_P, C.POINTER(C.POINTER(_U)), C.POINTER(_Z)]),
                "kestrel_tokenize": (C.c_int, [_P, C.c_char_p, _Z, C.c_int, C.POINTER(_U), _Z, C.POINTER(_Z)]),
                "kestrel_chat_turn": (C.c_int, [_P, C.c_char_p, _Z, C.c_char_p, _Z, C.POINTER(_U), _Z, C.POINTER(_Z)]),
                "kestrel_detokenize": (C.c_int, [_P, C.POINTER(_U), _Z, C.c_char_p, _Z, C.POINTER(_Z)]),
                "kestrel_feed": (C.c_int, [_P, C.POINTER(_U), _Z]),
                "kestrel_next": (C.c_int, [_P, C.POINTER(_U)]),
                "kestrel_piece": (C.c_int, [_P, _U, C.c_char_p, _Z, C.POINTER(_Z)]),
                "kestrel_piece_end": (C.c_int, [_P, C.c_char_p, _Z, C.POINTER(_Z)]),
                "kestrel_generate": (C.c_int, [_P, _U, _TEXT_FN, _P, C.POINTER(_U)]),
                "kestrel_cancel": (C.c_int, [_P]),
                "kestrel_cancel_clear": (C.c_int, [_P]),
                "kestrel_is_running": (C.c_int, [_P]),
                "kestrel_reset": (C.c_int, [_P]),
                "kestrel_sampling_get": (C.c_int, [_P, C.POINTER(_Sampling)]),
                "kestrel_sampling_set": (C.c_int, [_P, C.POINTER(_Sampling)]),
                "kestrel_state_size": (C.c_int, [_P, C.POINTER(_Z)]),
                "kestrel_state_save": (C.c_int, [_P, _P, _Z, C.POINTER(_Z)]),
                "kestrel_state_load": (C.c_int, [_P, _P, _Z]),
                "kestrel_rollback": (C.c_int, [_P, _Z]),
                "kestrel_context_policy": (C.c_int, [_P, C.c_int, _Z]),
                "kestrel_stop_strings_set": (C.c_int, [_P, C.POINTER(C.c_char_p), _Z]),
                "kestrel_chat_messages": (C.c_int, [_P, C.POINTER(_Message), _Z, C.POINTER(_U), _Z, C.POINTER(_Z)]),
                "kestrel_drafting_set": (C.c_int, [_P, _U, C.POINTER(_U), _Z]),
                "kestrel_draft_stats": (C.c_int, [_P, C.POINTER(_U), C.POINTER(_U)]),
                "kestrel_json_schema_set": (C.c_int, [_P, C.c_char_p, _Z]),
                "kestrel_logit_bias_set": (C.c_int, [_P, C.POINTER(_U), C.POINTER(C.c_float), _Z]),
                "kestrel_logits": (C.c_int, [_P, C.POINTER(C.c_float), _Z, C.POINTER(_Z)]),
                "kestrel_embed": (C.c_int, [_P, C.POINTER(_U), _Z, C.c_int, C.POINTER(C.c_float), _Z, C.POINTER(_Z)]),
            }
            # The ABI first: a library too old for this package lacks calls.
            for name in ("kestrel_abi_version", "kestrel_abi_minor"):
                f = getattr(lib, name, None)
                if f is not None:
                    f.restype, f.argtypes = C.c_uint32, []
            major = lib.kestrel_abi_version()
            minor = lib.kestrel_abi_minor() if hasattr(lib, "kestrel_abi_minor") else 0
            if major != ABI_VERSION or minor < ABI_MINOR:
                raise KestrelError(f"{path}: ABI {major}.{minor}, this package needs {ABI_VERSION}.{ABI_MINOR} or a later minor")
            for name, (res, args) in sigs.items():
                f = getattr(lib, name)
                f.restype, f.argtypes = res, args
            _lib = lib
        return _lib


def _raise(status, message):
    if status in (OK, END):
        return status
    cls = _ERRORS.get(status, KestrelError)
    raise cls(message or library().kestrel_status_string(status).decode(), status)


class Model:
    """A VQF model file, mapped once (read-only to the library) and shared by
    its sessions. `context`, `batch`, `kv_f32`, `draft` (tokens drafted by
    prompt lookup per step), `text_bytes` and `threads` (0: the built-in pool
    on the big cores; 1: the calling thread) are each session's engine
    settings."""

    def __init__(self, path, *, context=None, batch=None, kv_f32=False, draft=None, text_bytes=None, threads=None):
        lib = library()
        self.path = str(path)
        with open(self.path, "rb") as f:
            # A private map: page-aligned (the library needs 64), writable to
            # ctypes, never written by the library.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        self._addr = C.addressof(C.c_char.from_buffer(self._map))
        self._len = len(self._map)
        cfg = _Config()
        _raise(lib.kestrel_config_init(C.byref(cfg)), "kestrel_config_init")
        for name, value in (("context", context), ("batch", batch), ("draft", draft), ("text_bytes", text_bytes),
                            ("threads", threads)):
            if value is not None:
                setattr(cfg, name, int(value))
        cfg.kv_f32 = 1 if kv_f32 else 0
        self._config = cfg
        err, size = C.create_string_buffer(256), _Z()
        _raise(lib.kestrel_memory_size(self._addr, self._len, C.byref(cfg), C.byref(size), err, 256),
               err.value.decode(errors="replace"))
        self.memory_size = size.value

    def session(self, **sampling):
        """A new conversation over this model; `sampling` as
        `Session.set_sampling` takes it (default: `kestrel run`'s)."""
        return Session(self, **sampling)


class Session:
    """One conversation: the engine, its KV cache and history, in memory of
    its own. Not for use by two threads at once, but `cancel()`."""

    def __init__(self, model, **sampling):
        lib = library()
        self.model = model
        cfg = _Config.from_buffer_copy(model._config)
        for k, v in sampling.items():
            if k not in SAMPLING_FIELDS:
                raise ArgumentError(f"unknown sampling setting {k!r} (one of {', '.join(SAMPLING_FIELDS)})", -1)
            setattr(cfg, k, v)
        self._memory = C.create_string_buffer(model.memory_size + 64)
        base = (C.addressof(self._memory) + 63) & ~63
        err, h = C.create_string_buffer(256), _P()
        _raise(lib.kestrel_open(model._addr, model._len, C.byref(cfg), base, model.memory_size, C.byref(h), err, 256),
               err.value.decode(errors="replace"))
        self._h = h
        self._lib = lib

    # -- plumbing
    def _check(self, status):
        if status in (OK, END):
            return status
        return _raise(status, (self._lib.kestrel_error(self._h) or b"").decode(errors="replace"))

    def _ids_out(self, fill, cap=4096):
        """Ids a call writes (retried with the size it asks for)."""
        n = _Z()
        buf = (_U * cap)()
        st = fill(buf, cap, C.byref(n))
        if st == BufferError_.status:
            cap = n.value
            buf = (_U * cap)()
            st = fill(buf, cap, C.byref(n))
        self._check(st)
        return list(buf[: n.value])

    def close(self):
        """Ends the engine (its memory is freed with the session)."""
        if self._h:
            self._check(self._lib.kestrel_close(self._h))
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- what the engine is
    @property
    def kernels(self):
        return self._lib.kestrel_kernels(self._h).decode()

    @property
    def vocab(self):
        return self._lib.kestrel_vocab(self._h)

    @property
    def history(self):
        """Every token in the cache, in order."""
        p, n = C.POINTER(_U)(), _Z()
        self._check(self._lib.kestrel_history(self._h, C.byref(p), C.byref(n)))
        return p[: n.value]

    # -- text and ids
    def tokenize(self, text, special=False):
        """Token ids of `text` (as data unless `special`: then special
        tokens' text becomes them)."""
        b = text.encode()
        return self._ids_out(lambda buf, cap, n: self._lib.kestrel_tokenize(self._h, b, len(b), int(special), buf, cap, n))

    def chat_turn(self, user, system=None):
        """Token ids of a user turn in the model's chat format (after the
        cached turns, the next turn's)."""
        u = user.encode()
        s = system.encode() if system is not None else None
        return self._ids_out(lambda buf, cap, n: self._lib.kestrel_chat_turn(
            self._h, s, len(s) if s else 0, u, len(u), buf, cap, n))

    def chat_messages(self, messages):
        """Token ids of `messages` ({"role": "system"|"user"|"assistant"|
        "tool", "content": text}, at most 32) in the model's chat format,
        then the opened assistant turn, as the server formats a request's
        messages (after cached turns: following them)."""
        texts = [m["content"].encode() for m in messages]
        arr = (_Message * max(len(messages), 1))()
        for i, (m, t) in enumerate(zip(messages, texts)):
            if m["role"] not in _ROLES:
                raise ArgumentError(f"role {m['role']!r}: one of {', '.join(_ROLES)}")
            arr[i] = _Message(_ROLES[m["role"]], t, len(t))
        return self._ids_out(lambda buf, cap, n: self._lib.kestrel_chat_messages(
            self._h, arr, len(messages), buf, cap, n))

    def detokenize(self, ids):
        arr = (_U * len(ids))(*ids)
        cap, n = 4 * len(ids) + 16, _Z()
        out = C.create_string_buffer(cap)
        st = self._lib.kestrel_detokenize(self._h, arr, len(ids), out, cap, C.byref(n))
        if st == BufferError_.status:
            cap = n.value
            out = C.create_string_buffer(cap)
            st = self._lib.kestrel_detokenize(self._h, arr, len(ids), out, cap, C.byref(n))
        self._check(st)
        return out.raw[: n.value].decode(errors="replace")

    # -- running
    def feed(self, ids):
        """Runs `ids` after the cached tokens."""
        arr = (_U * len(ids))(*ids)
        self._check(self._lib.kestrel_feed(self._h, arr, len(ids)))

    def generate(self, max_tokens=256, on_text=None):
        """Samples up to `max_tokens` tokens after a feed (as `kestrel run`);
        returns (text, tokens, ended): `ended` when an end token ended it."""
        parts = []

        def emit(_user, text, length):
            piece = C.string_at(text, length).decode(errors="replace")
            parts.append(piece)
            if on_text:
                on_text(piece)

        cb, gen = _TEXT_FN(emit), _U()
        st = self._check(self._lib.kestrel_generate(self._h, max_tokens, cb, None, C.byref(gen)))
        return "".join(parts), gen.value, st == END

    def tokens(self, max_tokens=256):
        """Pulls up to `max_tokens` tokens one at a time, yielding (id,
        text) for each (text: what the token completes)."""
        buf, n, tid = C.create_string_buffer(64), _Z(), _U()
        for _ in range(max_tokens):
            if self._check(self._lib.kestrel_next(self._h, C.byref(tid))) == END:
                break
            self._check(self._lib.kestrel_piece(self._h, tid.value, buf, 64, C.byref(n)))
            yield tid.value, buf.raw[: n.value].decode(errors="replace")
        self._check(self._lib.kestrel_piece_end(self._h, buf, 64, C.byref(n)))
        if n.value:
            yield None, buf.raw[: n.value].decode(errors="replace")

    def chat(self, user, system=None, max_tokens=256):
        """A user turn and the whole answer's text."""
        self.feed(self.chat_turn(user, system))
        return self.generate(max_tokens)[0]

    def stream(self, user, system=None, max_tokens=256):
        """A user turn, then the answer's text piece by piece (an iterator)."""
        self.feed(self.chat_turn(user, system))
        for _, piece in self.tokens(max_tokens):
            if piece:
                yield piece

    def cancel(self):
        """From any thread: stops the running (or next) feed or generation
        with `CancelledError`."""
        self._check(self._lib.kestrel_cancel(self._h))

    def cancel_clear(self):
        self._check(self._lib.kestrel_cancel_clear(self._h))

    @property
    def running(self):
        return bool(self._lib.kestrel_is_running(self._h))

    def reset(self):
        """Forgets the conversation."""
        self._check(self._lib.kestrel_reset(self._h))

    # -- settings
    @property
    def sampling(self):
        """The sampling settings now, as a dict."""
        s = _Sampling(struct_size=C.sizeof(_Sampling))
        self._check(self._lib.kestrel_sampling_get(self._h, C.byref(s)))
        return {k: getattr(s, k) for k in SAMPLING_FIELDS}

    def set_sampling(self, reseed=False, **changes):
        """Changes sampling settings from the next token on (the cache is
        kept); `reseed` restarts the generator from `seed`. Out of range:
        `ArgumentError` naming the setting, nothing changed."""
        s = _Sampling(struct_size=C.sizeof(_Sampling))
        self._check(self._lib.kestrel_sampling_get(self._h, C.byref(s)))
        for k, v in changes.items():
            if k not in SAMPLING_FIELDS:
                raise ArgumentError(f"unknown sampling setting {k!r} (one of {', '.join(SAMPLING_FIELDS)})", -1)
            setattr(s, k, v)
        s.reseed = 1 if reseed else 0
        self._check(self._lib.kestrel_sampling_set(self._h, C.byref(s)))

    # -- state
    def save_state(self):
        """The conversation's state as bytes (history, KV rows, the
        sampler's state, waiting logits)."""
        size = _Z()
        self._check(self._lib.kestrel_state_size(self._h, C.byref(size)))
        buf, n = C.create_string_buffer(size.value), _Z()
        self._check(self._lib.kestrel_state_save(self._h, buf, size.value, C.byref(n)))
        return buf.raw[: n.value]

    def load_state(self, state):
        """Replaces the conversation with saved bytes (of a session over the
        same model file and KV type): `StateError` otherwise, nothing
        changed."""
        buf = C.create_string_buffer(bytes(state), len(state))
        self._check(self._lib.kestrel_state_load(self._h, buf, len(state)))

    def rollback(self, tokens):
        """Keeps the first `tokens` tokens (len(history) at an earlier turn's
        end) and forgets the rest."""
        self._check(self._lib.kestrel_rollback(self._h, tokens))

    def set_context_policy(self, keep=None):
        """What a feed that does not fit the context does from now on: with
        `keep` None (the default) it raises `ContextError`; with `keep` N the
        first N tokens stay and the oldest turns after them are dropped
        (the turns kept are run again at their new positions)."""
        policy = 0 if keep is None else 1
        self._check(self._lib.kestrel_context_policy(self._h, policy, keep or 0))

    def set_stop_strings(self, stops):
        """Texts that end `generate`/`chat`/`stream` answers from now on (at
        most 4, each 1 to 64 bytes of UTF-8; [] for none): the text stops
        before the first one found."""
        arr = (C.c_char_p * max(len(stops), 1))(*[s.encode() for s in stops])
        self._check(self._lib.kestrel_stop_strings_set(self._h, arr, len(stops)))

    def set_drafting(self, max_draft, prediction=None):
        """How `generate` drafts from now on (the same tokens, fewer steps):
        up to `max_draft` tokens per step (0: none; at most the model's
        `draft=`), looked up first in `prediction` (text or ids the answer
        is expected to resemble; None: none), then in the conversation."""
        if isinstance(prediction, str):
            prediction = self.tokenize(prediction)
        ids = list(prediction or [])
        arr = (_U * max(len(ids), 1))(*ids)
        self._check(self._lib.kestrel_drafting_set(self._h, max_draft, arr, len(ids)))

    def draft_stats(self):
        """(drafted, accepted) tokens of the last `generate`."""
        drafted, accepted = _U(), _U()
        self._check(self._lib.kestrel_draft_stats(self._h, C.byref(drafted), C.byref(accepted)))
        return drafted.value, accepted.value

    def set_json_schema(self, schema):
        """The JSON schema every answer keeps to from now on (a dict, or
        its JSON text; None for none): each answer after a feed is a JSON
        value the schema accepts. A keyword the engine does not enforce
        raises `ArgumentError` naming it and its path."""
        if schema is None:
            text = b""
        elif isinstance(schema, (str, bytes)):
            text = schema.encode() if isinstance(schema, str) else schema
        else:
            text = json.dumps(schema).encode()
        self._check(self._lib.kestrel_json_schema_set(self._h, text, len(text)))

    def set_logit_bias(self, bias):
        """Values added to the logits of the tokens named, from the next
        sampled token on ({token id: bias}, at most 300, each -100 to 100;
        {} for none), before the penalties and sampling settings."""
        items = list(bias.items())
        n = max(len(items), 1)
        ids = (_U * n)(*[int(i) for i, _ in items])
        values = (C.c_float * n)(*[float(b) for _, b in items])
        self._check(self._lib.kestrel_logit_bias_set(self._h, ids, values, len(items)))

    # -- logits and embeddings
    def logits(self):
        """The last fed row's logits (after `feed`, or the token pulled
        last): a list of `vocab` floats, before any sampling setting."""
        out = (C.c_float * self.vocab)()
        n = _Z()
        self._check(self._lib.kestrel_logits(self._h, out, self.vocab, C.byref(n)))
        return list(out[: n.value])

    def embed(self, text, pooling="mean"):
        """The unit-length embedding of `text` (a string, tokenized as
        data, or a list of token ids): the final norm's rows pooled by
        `pooling`, "mean" or "last" (Qwen3-Embedding's, its texts ending in
        <|endoftext|>). The conversation is forgotten (as `reset`)."""
        ids = self.tokenize(text) if isinstance(text, str) else list(text)
        modes = {"mean": 0, "last": 1}
        if pooling not in modes:
            raise ArgumentError(f"pooling must be 'mean' or 'last', not {pooling!r}")
        arr = (_U * len(ids))(*ids)
        cap = 1 << 14
        out, n = (C.c_float * cap)(), _Z()
        self._check(self._lib.kestrel_embed(self._h, arr, len(ids), modes[pooling], out, cap, C.byref(n)))
        return list(out[: n.value])

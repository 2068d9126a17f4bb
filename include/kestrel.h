/*
 * kestrel.h: Kestrel's C ABI (C11, usable from C++). Run Qwen models from a
 * VQF file in memory the host provides: no allocation (but a JSON schema's
 * tables in the hosted library, freed by kestrel_close), no global state
 * (but the abort handler), no operating system needed. Guide:
 * docs/embedding.md.
 *
 * Conventions:
 * - Every function returns a kestrel_status (or a plain value, as noted).
 *   After a failed call kestrel_error(handle) holds the message; kestrel_open
 *   and kestrel_memory_size write theirs into the caller's `err` buffer.
 * - Pointers come with explicit lengths; a pointer may be NULL only where a
 *   length of 0 goes with it or the function says so. Output lengths are
 *   written even on KESTREL_E_BUFFER: the size the call needs.
 * - Ownership: the library keeps no pointer the host gave it except the
 *   model's bytes and the memory block of kestrel_open, which are the
 *   engine's, unchanged by the host, and config.parallel / parallel_ctx,
 *   which must stay callable, all until kestrel_close. After kestrel_close
 *   the handle pointer is dead (calls with it fail while the block is left
 *   untouched, but do not rely on it).
 * - Threads: a handle is used by one thread at a time; kestrel_cancel may be
 *   called from any thread (or an interrupt handler) while it is open, but
 *   not while kestrel_close runs. Distinct handles are independent (they may
 *   share one model's bytes). From inside a callback of a call (on_text, a
 *   parallel task) only kestrel_cancel may be called with that handle; any
 *   other call returns KESTREL_E_ORDER.
 * - Versions: check kestrel_abi_version() == KESTREL_ABI_VERSION and
 *   kestrel_abi_minor() >= KESTREL_ABI_MINOR before kestrel_config_init.
 * - The one promise the library cannot check: the CPU features the host
 *   states in kestrel_config.cpu_features. Claiming one the CPU lacks runs
 *   an undefined instruction.
 */
#ifndef KESTREL_H
#define KESTREL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes: its major number, bumped only by an
   incompatible change (the shared library's SONAME, libkestrel.so.1,
   carries it), and its minor number, bumped when functions, types or
   constants are added (a struct that grows keeps its old struct_size
   valid). A library serves every host of its major number whose minor is at
   most its own: check kestrel_abi_version() == KESTREL_ABI_VERSION and
   kestrel_abi_minor() >= KESTREL_ABI_MINOR (a host built before the minor
   number existed checks the major alone, and is served). Minor 1
   (2026-12-07): stop strings, logits, embeddings, the context policy, logit
   bias, JSON schemas, drafting per call, chat messages. */
#define KESTREL_ABI_VERSION 1
#define KESTREL_ABI_MINOR 1

typedef enum kestrel_status {
    KESTREL_OK = 0,           /* done */
    KESTREL_END = 1,          /* kestrel_next / kestrel_generate: the answer ended on an end token (generate: or a stop string) */
    KESTREL_E_ARGUMENT = -1,  /* NULL pointer, length mismatch, setting out of range, text not UTF-8, bad handle */
    KESTREL_E_MEMORY = -2,    /* memory block too small or not 64-byte aligned */
    KESTREL_E_MODEL = -3,     /* model bytes damaged, truncated, misaligned or unsupported */
    KESTREL_E_TOKEN = -4,     /* token id outside the vocabulary */
    KESTREL_E_ORDER = -5,     /* call out of order (a token pulled before a prompt was fed; a call from inside a callback) */
    KESTREL_E_CONTEXT = -6,   /* the context (KV cache) is full */
    KESTREL_E_BUFFER = -7,    /* output buffer too small: the length out-parameter has the size needed */
    KESTREL_E_CANCELLED = -8, /* kestrel_cancel stopped the call */
    KESTREL_E_INTERNAL = -9,  /* anything else (a bug: report the message) */
    KESTREL_E_STATE = -10     /* a saved state damaged, truncated, or of another model file or KV type */
} kestrel_status;

/* CPU features for kestrel_config.cpu_features (0: the scalar kernels). */
#define KESTREL_CPU_DOTPROD 1u     /* aarch64: FEAT_DotProd (sdot) */
#define KESTREL_CPU_AVX2 2u        /* x86_64: AVX2, FMA and F16C */
#define KESTREL_CPU_AVX512_VNNI 4u /* x86_64: AVX512-VNNI with AVX512 F/BW/VL (with AVX2) */
#define KESTREL_CPU_AVX_VNNI 8u    /* x86_64: AVX-VNNI (with AVX2) */

/* An engine: lives inside the memory block given to kestrel_open. */
typedef struct kestrel_engine kestrel_engine;

/* A task of the parallel for: run item `index`. */
typedef void (*kestrel_task_fn)(void *task, size_t index);
/* The host's parallel for: call task_fn(task, i) exactly once for each i in
   [0, n), on any of its threads, and return when all calls have returned. */
typedef void (*kestrel_parallel_fn)(void *pool, size_t n, kestrel_task_fn task_fn, void *task);
/* Streamed answer text: `len` bytes of UTF-8 (not NUL-terminated), valid during the call. */
typedef void (*kestrel_text_fn)(void *user, const char *text, size_t len);
/* Where a panic (a bug) is reported, NUL-terminated, before the library traps (on whichever thread panicked, a pool thread too). */
typedef void (*kestrel_abort_fn)(const char *message);

typedef struct kestrel_config {
    uint32_t struct_size;          /* sizeof(kestrel_config): set by kestrel_config_init */
    uint32_t context;              /* most tokens in the KV cache (4096; capped by the file) */
    uint32_t batch;                /* prompt tokens per forward step (128) */
    uint32_t kv_f32;               /* 0: f16 KV cache (default), 1: f32 */
    uint32_t text_bytes;           /* longest text tokenize / chat_turn take (4096) */
    uint32_t draft;                /* kestrel_generate: tokens drafted by prompt lookup per step (0: none, at most 32) */
    uint32_t cpu_features;         /* KESTREL_CPU_* bits the host detected (0) */
    uint32_t threads;              /* threads behind `parallel` (1; 1 without it) */
    kestrel_parallel_fn parallel;  /* the parallel for (NULL: every loop on the calling thread) */
    void *parallel_ctx;            /* its first argument */
    float temperature;             /* 0: greedy (0.8) */
    float top_p;                   /* nucleus sampling, 1: off (0.95) */
    float min_p;                   /* min-p sampling, 0: off (0.05) */
    float repeat_penalty;          /* 1: off (1.0) */
    uint32_t top_k;                /* 0: off (40) */
    uint32_t repeat_last_n;        /* tokens the repetition penalty looks at (64) */
    uint64_t seed;                 /* the sampler's seed */
} kestrel_config;

/* Sampling settings a handle can change between calls (kestrel_sampling_get / kestrel_sampling_set). */
typedef struct kestrel_sampling {
    uint32_t struct_size;  /* sizeof(kestrel_sampling): set by the host before either call */
    float temperature;     /* 0: greedy */
    float top_p;           /* nucleus sampling, 1: off */
    float min_p;           /* min-p sampling, 0: off */
    float repeat_penalty;  /* 1: off */
    uint32_t top_k;        /* 0: off */
    uint32_t repeat_last_n; /* tokens the repetition penalty looks at */
    uint32_t reseed;       /* kestrel_sampling_set: 1 restarts the generator from seed, 0 keeps its state */
    uint64_t seed;         /* the sampler's seed */
} kestrel_sampling;

/* Library version string (static, NUL-terminated). Any thread. */
const char *kestrel_version(void);
/* The library's ABI major number (KESTREL_ABI_VERSION for this header's hosts). Any thread. */
uint32_t kestrel_abi_version(void);
/* The library's ABI minor number (at least KESTREL_ABI_MINOR for this header's hosts). Any thread. */
uint32_t kestrel_abi_minor(void);
/* Fills *config with `kestrel run`'s defaults. Writes only *config; any thread. */
kestrel_status kestrel_config_init(kestrel_config *config);
/* Checks the model and writes the memory block's size for it and *config to *bytes (not NULL); messages into err[err_len]. Reads model only during the call; any thread. */
kestrel_status kestrel_memory_size(const void *model, size_t model_len, const kestrel_config *config,
                                   size_t *bytes, char *err, size_t err_len);
/* Opens an engine in memory[memory_len] (64-byte aligned, kestrel_memory_size bytes) over model[model_len] (64-byte aligned); *out the handle. Both buffers are the engine's until kestrel_close; messages into err[err_len]. Any thread; the handle is then the caller's. */
kestrel_status kestrel_open(const void *model, size_t model_len, const kestrel_config *config,
                            void *memory, size_t memory_len, kestrel_engine **out, char *err,
                            size_t err_len);
/* Ends the handle; its memory, the model's bytes and the parallel callback are the host's again. Owner thread, with no kestrel_cancel in flight. */
kestrel_status kestrel_close(kestrel_engine *engine);
/* The message of the handle's last failed call ("" after a success); owned by the handle, valid until its next call. Owner thread. */
const char *kestrel_error(const kestrel_engine *engine);
/* What a status means, one static NUL-terminated line ("unknown status" for any other value). For KESTREL_E_ORDER from a call made while another runs on the handle, this is the message: the handle's own (kestrel_error) is the running call's. Any thread. */
const char *kestrel_status_string(int status);
/* The name of the kernels in use (static string). Owner thread. */
const char *kestrel_kernels(const kestrel_engine *engine);
/* The vocabulary size (0 for an invalid handle). Owner thread. */
uint32_t kestrel_vocab(const kestrel_engine *engine);
/* The tokens in the KV cache: *ids points into the handle's memory (valid until its next call), *n of them. Owner thread. */
kestrel_status kestrel_history(kestrel_engine *engine, const uint32_t **ids, size_t *n);
/* Token ids of text[len] (len at most config.text_bytes) into ids[cap], *n their count (n not NULL). special 0: all text is data, never control tokens; 1: special tokens' text becomes them (your own template). Owner thread. */
kestrel_status kestrel_tokenize(kestrel_engine *engine, const char *text, size_t len, int special,
                                uint32_t *ids, size_t cap, size_t *n);
/* Token ids of a user turn in the model's chat format (as `kestrel run`; after cached turns, the next turn) into ids[cap], *n their count; system may be NULL (the template's default); the texts together at most config.text_bytes, and data. Owner thread. */
kestrel_status kestrel_chat_turn(kestrel_engine *engine, const char *system, size_t system_len,
                                 const char *user, size_t user_len, uint32_t *ids, size_t cap,
                                 size_t *n);
/* A message of kestrel_chat_messages: its role (KESTREL_ROLE_*) and len bytes of UTF-8 text (data). */
#define KESTREL_ROLE_SYSTEM 0
#define KESTREL_ROLE_USER 1
#define KESTREL_ROLE_ASSISTANT 2
#define KESTREL_ROLE_TOOL 3
typedef struct kestrel_message {
    int role;
    const char *text;
    size_t len;
} kestrel_message;
/* Token ids of messages[count] (at most 32: system, user, assistant and tool turns) in the model's chat format and the opened assistant turn, as the server formats a request's messages (no tools' schemas): on an empty cache from the start, after cached turns following them (an open answer closed first, as kestrel_chat_turn does). The texts are data, never control tokens, and fit text_bytes together, with 64 bytes for each message past two. Owner thread. */
kestrel_status kestrel_chat_messages(kestrel_engine *engine, const kestrel_message *messages, size_t count, uint32_t *ids,
                                     size_t cap, size_t *n);
/* The text of ids[n] (special tokens included) into out[cap], not NUL-terminated; *len its length. Owner thread. */
kestrel_status kestrel_detokenize(kestrel_engine *engine, const uint32_t *ids, size_t n, char *out,
                                  size_t cap, size_t *len);
/* Runs ids[n] through the model after the cached tokens (the cache is kept across turns); a cancel stops it within one layer of the chunk running, the chunks completed kept. Owner thread. */
kestrel_status kestrel_feed(kestrel_engine *engine, const uint32_t *ids, size_t n);
/* Samples the next token into *id and runs it through the model: KESTREL_OK a token of the answer, KESTREL_END an end token (the answer is over). Owner thread. */
kestrel_status kestrel_next(kestrel_engine *engine, uint32_t *id);
/* The text token id completes in the answer's stream into out[cap] (*len bytes; a character split across tokens comes whole); on KESTREL_E_BUFFER nothing changed. Owner thread. */
kestrel_status kestrel_piece(kestrel_engine *engine, uint32_t id, char *out, size_t cap, size_t *len);
/* Ends the answer's text stream: an unfinished character becomes U+FFFD (at most 3 bytes). Owner thread. */
kestrel_status kestrel_piece_end(kestrel_engine *engine, char *out, size_t cap, size_t *len);
/* Samples up to max_tokens tokens as `kestrel run` does, text to on_text(user, ...) (may be NULL), *generated the count (may be NULL): KESTREL_END, KESTREL_OK at max_tokens, KESTREL_E_CONTEXT when the cache filled (the last token uncached), KESTREL_E_CANCELLED (a cancel pending before the call: nothing runs). Owner thread. */
kestrel_status kestrel_generate(kestrel_engine *engine, uint32_t max_tokens, kestrel_text_fn on_text,
                                void *user, uint32_t *generated);
/* Stops the running (or next) feed / next / generate with KESTREL_E_CANCELLED. Any thread, any time while the handle is open. */
kestrel_status kestrel_cancel(kestrel_engine *engine);
/* Takes back a cancel no call has seen yet (made while no call ran, it would stop the next one). Any thread, as kestrel_cancel. */
kestrel_status kestrel_cancel_clear(kestrel_engine *engine);
/* 1 while a call runs on the handle (asked from another thread or from the call's own callback), else 0 (also for a NULL or closed handle). Any thread, as kestrel_cancel. */
int kestrel_is_running(const kestrel_engine *engine);
/* Forgets the conversation: the cache is empty, the settings stay. Owner thread. */
kestrel_status kestrel_reset(kestrel_engine *engine);
/* The handle's sampling settings now into *sampling (set its struct_size first; reseed comes back 0). Owner thread. */
kestrel_status kestrel_sampling_get(kestrel_engine *engine, kestrel_sampling *sampling);
/* New sampling settings from the next sampled token on; the conversation and its cache are kept. Out of range or NaN: KESTREL_E_ARGUMENT naming the field, nothing changed. Owner thread. */
kestrel_status kestrel_sampling_set(kestrel_engine *engine, const kestrel_sampling *sampling);
/* *size: the bytes kestrel_state_save writes now (history, KV rows, the sampler's state, and the last row's logits when a token waits to be sampled). Owner thread. */
kestrel_status kestrel_state_size(kestrel_engine *engine, size_t *size);
/* Saves the conversation into out (room for cap bytes): *len its length, or the size needed with KESTREL_E_BUFFER. Owner thread. */
kestrel_status kestrel_state_save(kestrel_engine *engine, void *out, size_t cap, size_t *len);
/* Replaces the conversation with saved bytes from an engine over the same model file with the same kv_f32; the next call goes on as the saved engine's would have. KESTREL_E_STATE: damaged, or another model or KV type; KESTREL_E_CONTEXT: longer than this context; nothing changes then. Owner thread. */
kestrel_status kestrel_state_load(kestrel_engine *engine, const void *state, size_t len);
/* Keeps the first `tokens` tokens (kestrel_history's count at an earlier turn's end; counts taken before KESTREL_CONTEXT_DROP_OLDEST dropped turns no longer mark those turns) and forgets the rest; the next call is a feed. Owner thread. */
kestrel_status kestrel_rollback(kestrel_engine *engine, size_t tokens);
/* The context policy of the feeds from now on: KESTREL_CONTEXT_REFUSE (the default: a feed that does not fit is KESTREL_E_CONTEXT), or KESTREL_CONTEXT_DROP_OLDEST keeping the first `keep` tokens (a system prompt, say) and dropping the oldest turns after them, whole, until the feed and an answer of a quarter of the context after `keep` fit (or at least the feed), the turns kept run again at their new positions; a feed that still cannot fit is KESTREL_E_CONTEXT, nothing changed. Owner thread. */
#define KESTREL_CONTEXT_REFUSE 0
#define KESTREL_CONTEXT_DROP_OLDEST 1
kestrel_status kestrel_context_policy(kestrel_engine *engine, int policy, size_t keep);
/* Texts that end kestrel_generate's answers from now on: n (at most 4) NUL-terminated UTF-8 strings of 1 to 64 bytes (n 0: none). The text stops before the first one found within the call and the call returns KESTREL_END; the tokens of the step that found it stay cached (the next kestrel_chat_turn closes the answer). kestrel_next does not look for them; while they are set, a cancel is seen with the next piece of text. Otherwise KESTREL_E_ARGUMENT, nothing changed. Owner thread. */
kestrel_status kestrel_stop_strings_set(kestrel_engine *engine, const char *const *stops, size_t n);
/* How kestrel_generate drafts from now on (speculative decoding: the same tokens, fewer steps): up to max_draft tokens per verify step (0: plain decoding; at most config.draft, which sized the verify rows; config.draft is the default), looked up first in prediction[n] (ids of the text the answer is expected to resemble, copied: OpenAI's predicted outputs; n 0: none; at most the context), then in the conversation. Otherwise KESTREL_E_ARGUMENT (an id past the vocabulary: KESTREL_E_TOKEN), nothing changed. Owner thread. */
kestrel_status kestrel_drafting_set(kestrel_engine *engine, uint32_t max_draft, const uint32_t *prediction, size_t n);
/* The tokens the last kestrel_generate drafted (*drafted) and kept (*accepted); 0 before any. Owner thread. */
kestrel_status kestrel_draft_stats(kestrel_engine *engine, uint32_t *drafted, uint32_t *accepted);
/* The JSON schema every answer keeps to from the next sampled token on, until set again: len bytes of a JSON Schema (len 0: none). Each answer (from the first token after a feed or a restored state; the saved format does not keep where a constrained value stands, so a state saved mid-answer starts a new value there) is a JSON value the schema accepts: no token that cannot continue one is sampled, and an end token only once the value is complete (an answer cut by max_tokens goes on with the next call). Compiled strictly, as the server's strict: true: a keyword not enforced is KESTREL_E_ARGUMENT naming it and its path (as `kestrel schema check --strict`), nothing changed. The first schema sorts the vocabulary (once per handle) in memory the library allocates, freed by kestrel_close (call it before reusing the block). Hosted library only: the freestanding one refuses any schema with KESTREL_E_ARGUMENT. Owner thread. */
kestrel_status kestrel_json_schema_set(kestrel_engine *engine, const char *schema, size_t len);
/* Values added to the logits of the tokens named, from the next sampled token on, until set again (OpenAI's logit_bias): n (at most 300) pairs ids[i] (below the vocabulary) and bias[i] (-100 to 100; -100 bans a token), the last of an id given twice counting (n 0: none). Applied before the penalties and sampling settings; kestrel_logits stays the model's. Otherwise KESTREL_E_ARGUMENT naming the fault, nothing changed. Owner thread. */
kestrel_status kestrel_logit_bias_set(kestrel_engine *engine, const uint32_t *ids, const float *bias, size_t n);
/* The last fed row's logits (after a feed, or the token kestrel_next pulled last), before any sampling setting: one float per vocabulary id into out (room for cap), *n the count, or the count needed with KESTREL_E_BUFFER. Nothing fed since the answer ended: KESTREL_E_ORDER. Owner thread. */
kestrel_status kestrel_logits(kestrel_engine *engine, float *out, size_t cap, size_t *n);
/* kestrel_embed's pooling of the final norm's rows: their mean, or the last token's (Qwen3-Embedding's, its texts ending in <|endoftext|>). */
#define KESTREL_POOLING_MEAN 0
#define KESTREL_POOLING_LAST 1
/* The unit-length embedding of the tokens ids (1 to the context) into out (room for cap floats): *n the hidden size, or the size needed with KESTREL_E_BUFFER. The text runs as a conversation of its own: the handle's conversation is forgotten (as kestrel_reset; use a second handle to keep one). Cancellable within a layer. Owner thread. */
kestrel_status kestrel_embed(kestrel_engine *engine, const uint32_t *ids, size_t len, int pooling, float *out,
                             size_t cap, size_t *n);
/* Sets the panic report callback (process-wide, the library's one global, stored atomically; NULL: trap silently). Any thread. */
void kestrel_set_abort_handler(kestrel_abort_fn handler);

#ifdef __cplusplus
}
#endif

#endif /* KESTREL_H */

/*
 * A C host of Kestrel's C ABI (include/kestrel.h): what
 * `kestrel run FILE -p PROMPT -n N --temp 0 --ids` prints (the answer's
 * text, a newline, its token ids as [a, b, c]), through the library.
 *
 * Two builds of this one file (scripts/capi.sh does both):
 * - freestanding (KESTREL_FREESTANDING): aarch64, -ffreestanding -nostdlib,
 *   no libc; its own _start and two Linux syscalls (write, exit_group); the
 *   model embedded (.incbin of KESTREL_MODEL_PATH); memory a static array;
 *   dotprod stated from the kernel's AT_HWCAP (auxiliary vector), so one
 *   binary takes the dotprod kernels under qemu -cpu cortex-a76 and the
 *   scalar ones under cortex-a53. Prompt and length: PROMPT, N_PREDICT.
 * - hosted (Linux with libc): `c-host MODEL PROMPT N [THREADS]`; the model
 *   mapped with mmap, memory from aligned_alloc, CPU features from the
 *   compiler's cpu detection (x86_64) or getauxval (aarch64), and with
 *   THREADS > 1 a small pthread pool behind the parallel-for callback.
 * Exit status: 0, 1 on an error (the message on stderr).
 */
#ifndef KESTREL_FREESTANDING
#define _POSIX_C_SOURCE 200809L /* clock_gettime, mmap, pthreads under -std=c11 */
#endif
#include "kestrel.h"

#define PROMPT "The capital of France"
#define N_PREDICT 24
#define MAX_TOKENS 4096

/* ---- platform: output, exit, model, memory, CPU, threads ---- */
#ifdef KESTREL_FREESTANDING

static long sys3(long n, long a, long b, long c) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
    return x0;
}

static void out(int fd, const char *s, size_t n) {
    while (n > 0) {
        long w = sys3(64, fd, (long)s, (long)n); /* write */
        if (w == -4) continue;                 /* EINTR */
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static _Noreturn void quit(int code) {
    sys3(94, code, 0, 0); /* exit_group */
    for (;;) {
    }
}

/* Microseconds of CLOCK_MONOTONIC (clock_gettime, syscall 113). */
static uint64_t now_us(void) {
    long ts[2] = {0, 0};
    sys3(113, 1, (long)ts, 0);
    return (uint64_t)ts[0] * 1000000u + (uint64_t)ts[1] / 1000u;
}

#define STR2(x) #x
#define STR(x) STR2(x)
__asm__(".section .rodata.kestrel_model,\"a\"\n"
        ".balign 64\n"
        "kestrel_model_start:\n"
        ".incbin \"" STR(KESTREL_MODEL_PATH) "\"\n"
        "kestrel_model_end:\n"
        ".previous\n");
extern const unsigned char kestrel_model_start[], kestrel_model_end[];

#define MEMORY_BYTES (8u << 20)
static unsigned char memory_block[MEMORY_BYTES] __attribute__((aligned(64)));

static uint32_t cpu_features(const unsigned long *auxv) {
    for (; auxv[0] != 0; auxv += 2) {
        if (auxv[0] == 16 /* AT_HWCAP */) return (auxv[1] >> 20) & 1 ? KESTREL_CPU_DOTPROD : 0;
    }
    return 0;
}

#else /* hosted */

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include <time.h>

static void out(int fd, const char *s, size_t n) { fwrite(s, 1, n, fd == 1 ? stdout : stderr); }
static uint64_t now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}
static void quit(int code) { fflush(stdout); exit(code); }

static uint32_t cpu_features(void) {
#if defined(__x86_64__)
    uint32_t f = 0;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
        f |= KESTREL_CPU_AVX2;
        if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
            f |= KESTREL_CPU_AVX512_VNNI;
    }
    return f;
#elif defined(__aarch64__)
    return (getauxval(AT_HWCAP) >> 20) & 1 ? KESTREL_CPU_DOTPROD : 0;
#else
    return 0;
#endif
}

/* A pool of spinning workers behind kestrel_parallel_fn: each job is
   published by bumping `generation`; the caller and every worker claim
   indices from one counter, and each worker counts itself `finished` when it
   finds none left. The caller returns only when all workers have finished
   the job, so no worker is still claiming when the next job is written. */
static struct {
    _Atomic unsigned long generation;
    _Atomic size_t next, finished;
    size_t n, workers;
    kestrel_task_fn fn;
    void *task;
} pool;

static void claim(void) {
    size_t i;
    while ((i = atomic_fetch_add(&pool.next, 1)) < pool.n) pool.fn(pool.task, i);
}

static void *worker(void *arg) {
    unsigned long seen = 0;
    (void)arg;
    for (;;) {
        unsigned long g;
        unsigned spins = 0;
        while ((g = atomic_load(&pool.generation)) == seen) {
            if (++spins > 100000) sched_yield();
        }
        seen = g;
        claim();
        atomic_fetch_add(&pool.finished, 1);
    }
    return NULL;
}

static void parallel_for(void *ctx, size_t n, kestrel_task_fn fn, void *task) {
    (void)ctx;
    pool.n = n;
    pool.fn = fn;
    pool.task = task;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.finished, 0);
    atomic_fetch_add(&pool.generation, 1);
    claim();
    while (atomic_load(&pool.finished) < pool.workers) {
    }
}

#endif

/* ---- the generation: the same for both builds ---- */
static void say(int fd, const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    out(fd, s, n);
}

static void say_u64(int fd, uint64_t v) {
    char b[20];
    int i = 20;
    do b[--i] = (char)('0' + v % 10); while ((v /= 10) != 0);
    out(fd, b + i, (size_t)(20 - i));
}

static int failed(kestrel_engine *e, const char *what) {
    say(2, "c-host: ");
    say(2, what);
    say(2, ": ");
    say(2, kestrel_error(e));
    say(2, "\n");
    return 1;
}

static uint32_t prompt_ids[MAX_TOKENS], answer[MAX_TOKENS];

/* Opens an engine over model[len] in memory[cap], runs the prompt, prints. */
static int generate(const void *model, size_t len, void *memory, size_t cap, kestrel_config *cfg,
                    const char *prompt, size_t prompt_len, uint32_t n_predict) {
    char err[256], text[256];
    size_t need, n, piece;
    uint32_t id, count = 0;
    uint64_t t0, t1, t2;
    kestrel_engine *e;
    kestrel_status st;
    if (kestrel_abi_version() != KESTREL_ABI_VERSION || kestrel_abi_minor() < KESTREL_ABI_MINOR) return say(2, "c-host: ABI mismatch\n"), 1;
    if (kestrel_memory_size(model, len, cfg, &need, err, sizeof err) != KESTREL_OK ||
        kestrel_open(model, len, cfg, memory, cap, &e, err, sizeof err) != KESTREL_OK)
        return say(2, "c-host: "), say(2, err), say(2, "\n"), 1;
    if (kestrel_chat_turn(e, NULL, 0, prompt, prompt_len, prompt_ids, MAX_TOKENS, &n) != KESTREL_OK)
        return failed(e, "chat_turn");
    t0 = now_us();
    if (kestrel_feed(e, prompt_ids, n) != KESTREL_OK) return failed(e, "feed");
    t1 = now_us();
    while (count < n_predict && count < MAX_TOKENS) {
        st = kestrel_next(e, &id);
        if (st == KESTREL_END) break;
        if (st != KESTREL_OK) return failed(e, "next");
        answer[count++] = id;
        if (kestrel_piece(e, id, text, sizeof text, &piece) != KESTREL_OK) return failed(e, "piece");
        out(1, text, piece);
    }
    if (kestrel_piece_end(e, text, sizeof text, &piece) != KESTREL_OK) return failed(e, "piece_end");
    out(1, text, piece);
    t2 = now_us();
    say(1, "\n[");
    for (uint32_t i = 0; i < count; i++) {
        if (i) say(1, ", ");
        say_u64(1, answer[i]);
    }
    say(1, "]\n");
    say(2, "c-host: prefill ");
    say_u64(2, n);
    say(2, " tok in ");
    say_u64(2, t1 - t0);
    say(2, " us, decode ");
    say_u64(2, count);
    say(2, " tok in ");
    say_u64(2, t2 - t1);
    say(2, " us, ");
    say(2, kestrel_kernels(e));
    say(2, " kernels\n");
    return kestrel_close(e) != KESTREL_OK;
}

#ifdef KESTREL_FREESTANDING

void c_start(const unsigned long *sp) __attribute__((used, noreturn));
void c_start(const unsigned long *sp) {
    const unsigned long *p = sp + 1 + sp[0] + 1; /* past argc, argv, NULL */
    kestrel_config cfg;
    while (*p) p++; /* past envp */
    kestrel_config_init(&cfg);
    cfg.temperature = 0;
    cfg.cpu_features = cpu_features(p + 1);
    quit(generate(kestrel_model_start, (size_t)(kestrel_model_end - kestrel_model_start), memory_block,
                  MEMORY_BYTES, &cfg, PROMPT, sizeof PROMPT - 1, N_PREDICT));
}

/* The entry point: the stack pointer (argc, argv, envp, auxv) to c_start. */
__asm__(".text\n.global _start\n_start:\n mov x0, sp\n bl c_start\n");

#else

int main(int argc, char **argv) {
    kestrel_config cfg;
    struct stat st;
    void *model, *memory;
    size_t need, prompt_len = 0;
    char err[256];
    int fd;
    if (argc < 4) return fprintf(stderr, "usage: c-host MODEL PROMPT N [THREADS]\n"), 2;
    fd = open(argv[1], O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0) return perror(argv[1]), 1;
    model = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (model == MAP_FAILED) return perror("mmap"), 1;
    kestrel_config_init(&cfg);
    cfg.temperature = 0;
    cfg.cpu_features = cpu_features();
    if (argc > 4 && atoi(argv[4]) > 1) {
        pthread_t t;
        uint32_t want = (uint32_t)atoi(argv[4]);
        for (uint32_t i = 1; i < want; i++)
            if (pthread_create(&t, NULL, worker, NULL) == 0) pool.workers++;
        cfg.threads = (uint32_t)pool.workers + 1; /* the workers that started, and the caller */
        if (pool.workers > 0) cfg.parallel = parallel_for;
    }
    if (kestrel_memory_size(model, (size_t)st.st_size, &cfg, &need, err, sizeof err) != KESTREL_OK)
        return fprintf(stderr, "c-host: %s\n", err), 1;
    memory = aligned_alloc(64, (need + 63) / 64 * 64);
    if (!memory) return perror("aligned_alloc"), 1;
    while (argv[2][prompt_len]) prompt_len++;
    fd = generate(model, (size_t)st.st_size, memory, need, &cfg, argv[2], prompt_len,
                  (uint32_t)atoi(argv[3]));
    quit(fd);
    return fd;
}

#endif

"""byoc's thread pool: the threads every native and ccompiler region computes on.

One pool per process, built once like a region (``byoc.codegen.build_cache``) and attached to
each region module as it is loaded (``attach``): generated code and the C library call
``byoc_parallel(n, fn, ctx)``, which runs ``fn(ctx, lo, hi)`` over [0, n) cut into at most
four ranges per thread, the calling thread taking ranges too. Threads are made when first
needed and live for the process; between calls they spin ~50 us (kernels of a region follow
each other closely) and then sleep on a futex, so an idle pool costs nothing and one that is
busy with another engine's work (onnxruntime, numpy) does not compete with it for long.

How many threads a call may use is the calling thread's (``set_threads``, thread-local, set
by each region call to its build's count). A call made while the pool is busy (another Python
thread's region) or from inside a task runs on the calling thread alone. Either way the
result is the same: tasks are written so that no value depends on how [0, n) is cut.

Why a pool of our own rather than OpenMP: ``docs/decisions.md``. ``benchmarks/bench_pool.py``
builds the same API over libgomp (``OPENMP``) to measure both.
"""

from __future__ import annotations

import threading

from byoc.codegen import build_cache

# The API regions see; repeated in runtime_c (region sources declare it too).
API = r"""
typedef void (*byoc_task_fn)(void *ctx, long lo, long hi);
typedef struct {
    int (*threads)(void);
    void (*parallel)(long n, byoc_task_fn fn, void *ctx);
    void *(*scratch)(int slot, long bytes);
    long long (*now)(void);  /* CLOCK_MONOTONIC in ns (Python's perf_counter), for --profile */
} byoc_rt_api;
"""

SOURCE = API + r"""
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(BYOC_POOL_OPENMP)
#include <omp.h>
#endif

#define BYOC_MAX_WORKERS 255
#define BYOC_CHUNKS_PER_THREAD 4
#define BYOC_SPIN_NS 50000L
#define BYOC_SCRATCH_SLOTS 3

static __thread int tls_threads = 1;
static __thread int tls_in_task = 0;

void byoc_pool_set_threads(int n) { tls_threads = n < 1 ? 1 : n; }
static int pool_threads(void) { return tls_in_task ? 1 : tls_threads; }

/* -- per-thread scratch: GEMM packing (slot 0), generated tasks (slot 1), a caller's buffers
      its tasks share (slot 2) -- */
typedef struct { void *p; long size; } byoc_slot;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v) {
    byoc_slot *s = (byoc_slot *)v;
    for (int i = 0; i < BYOC_SCRATCH_SLOTS; i++) free(s[i].p);
    free(s);
}
static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_free); }

static void *pool_scratch(int slot, long bytes) {
    pthread_once(&scratch_once, scratch_init);
    byoc_slot *s = (byoc_slot *)pthread_getspecific(scratch_key);
    if (!s) {
        s = (byoc_slot *)calloc(BYOC_SCRATCH_SLOTS, sizeof(byoc_slot));
        if (!s) abort();
        pthread_setspecific(scratch_key, s);
    }
    if (s[slot].size < bytes) {
        free(s[slot].p);
        long size = (bytes + 4095) / 4096 * 4096;
        s[slot].p = aligned_alloc(64, (size_t)size);
        if (!s[slot].p) abort();
        s[slot].size = size;
    }
    return s[slot].p;
}

static long chunks_of(long n, int threads, long *chunk) {
    long want = (long)threads * BYOC_CHUNKS_PER_THREAD;
    long nchunks = n < want ? n : want;
    *chunk = (n + nchunks - 1) / nchunks;
    return (n + *chunk - 1) / *chunk;
}

#if defined(BYOC_POOL_OPENMP)
/* -- the same API over libgomp, for benchmarks/bench_pool.py ---------------------------------- */
static void pool_parallel(long n, byoc_task_fn fn, void *ctx) {
    int threads = pool_threads();
    if (n <= 1 || threads <= 1 || omp_in_parallel()) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    long chunk, nchunks = chunks_of(n, threads, &chunk);
    #pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long c = 0; c < nchunks; c++) {
        tls_in_task = 1;
        fn(ctx, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
        tls_in_task = 0;
    }
}
int byoc_pool_workers(void) { return omp_get_max_threads(); }
#else
/* -- byoc's own pool -------------------------------------------------------------------------- */
/* A job is open while its state holds its generation (high 32 bits) without the CLOSED bit;
   the low bits count the helpers inside it. A helper enters only an open job of the
   generation it was woken for, so the caller never waits for a helper that was not scheduled
   in time (a loaded machine): once every range is done and no helper is inside, it closes. */
#define BYOC_CLOSED 0x80000000UL

typedef struct {
    _Atomic unsigned go;     /* the latest job generation this worker is asked to join */
    _Atomic int sleeping;
    pthread_t tid;
    char pad[64];
} byoc_worker;

static struct {
    byoc_task_fn fn;
    void *ctx;
    long n, chunk, nchunks;
    _Atomic long next, done;
    _Atomic unsigned long state;
} job;

static pthread_mutex_t dispatch = PTHREAD_MUTEX_INITIALIZER;
static byoc_worker *workers[BYOC_MAX_WORKERS];
static int n_workers = 0;
static unsigned generation = 0;

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void run_chunks(void) {
    long c;
    while ((c = atomic_fetch_add(&job.next, 1)) < job.nchunks) {
        long lo = c * job.chunk, hi = lo + job.chunk < job.n ? lo + job.chunk : job.n;
        job.fn(job.ctx, lo, hi);
        atomic_fetch_add(&job.done, 1);
    }
}

static unsigned wait_for_job(byoc_worker *w, unsigned seen) {
    long start = now_ns();
    for (unsigned i = 0;; i++) {
        unsigned g = atomic_load(&w->go);
        if (g != seen) return g;
        if ((i & 255) != 255 || now_ns() - start < BYOC_SPIN_NS) {
            cpu_relax();
            continue;
        }
#if defined(__linux__)
        atomic_store(&w->sleeping, 1);
        if (atomic_load(&w->go) == seen)
            syscall(SYS_futex, (unsigned *)&w->go, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        atomic_store(&w->sleeping, 0);
#else
        sched_yield();
#endif
    }
}

static void *worker_main(void *arg) {
    byoc_worker *w = (byoc_worker *)arg;
    tls_in_task = 1;
    unsigned seen = atomic_load(&w->go);
    for (;;) {
        seen = wait_for_job(w, seen);
        unsigned long s = atomic_load(&job.state);
        while ((s >> 32) == seen && !(s & BYOC_CLOSED)) {
            if (atomic_compare_exchange_weak(&job.state, &s, s + 1)) {
                run_chunks();
                atomic_fetch_sub(&job.state, 1);
                break;
            }
        }
    }
    return NULL;
}

/* Make workers up to ``want``; returns how many there are (fewer if the system refuses). */
static int ensure_workers(int want) {
    if (want > BYOC_MAX_WORKERS) want = BYOC_MAX_WORKERS;
    while (n_workers < want) {
        byoc_worker *w = (byoc_worker *)aligned_alloc(64, sizeof(byoc_worker));
        if (!w) break;
        memset(w, 0, sizeof *w);
        atomic_store(&w->go, generation);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        int failed = pthread_create(&w->tid, &attr, worker_main, w);
        pthread_attr_destroy(&attr);
        if (failed) {
            free(w);
            break;
        }
        pthread_detach(w->tid);
        workers[n_workers++] = w;
    }
    return n_workers < want ? n_workers : want;
}

static void pool_parallel(long n, byoc_task_fn fn, void *ctx) {
    int threads = pool_threads();
    if (n <= 1 || threads <= 1 || pthread_mutex_trylock(&dispatch) != 0) {
        if (n > 0) fn(ctx, 0, n);  /* alone: small, nested, or the pool is busy */
        return;
    }
    long chunk, nchunks = chunks_of(n, threads, &chunk);
    int helpers = ensure_workers((int)(nchunks - 1 < threads - 1 ? nchunks - 1 : threads - 1));
    unsigned g = ++generation;
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.chunk = chunk;
    job.nchunks = nchunks;
    atomic_store(&job.next, 0);
    atomic_store(&job.done, 0);
    atomic_store(&job.state, (unsigned long)g << 32);
    for (int i = 0; i < helpers; i++) {
        atomic_store(&workers[i]->go, g);
#if defined(__linux__)
        if (atomic_load(&workers[i]->sleeping))
            syscall(SYS_futex, (unsigned *)&workers[i]->go, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#endif
    }
    tls_in_task = 1;
    run_chunks();
    tls_in_task = 0;
    long start = 0;
    for (unsigned k = 0;; k++) {  /* every range done, no helper inside: close the job */
        unsigned long open = (unsigned long)g << 32;
        if (atomic_load(&job.done) == nchunks &&
            atomic_compare_exchange_strong(&job.state, &open, open | BYOC_CLOSED))
            break;
        cpu_relax();
        if ((k & 1023) == 1023) {  /* a helper descheduled mid-range on a loaded machine */
            if (!start) start = now_ns();
            else if (now_ns() - start > BYOC_SPIN_NS) sched_yield();
        }
    }
    pthread_mutex_unlock(&dispatch);
}

/* A forked child has none of the parent's threads: it starts a pool of its own. */
static void pool_after_fork(void) {
    n_workers = 0;
    pthread_mutex_init(&dispatch, NULL);
}
__attribute__((constructor)) static void pool_init(void) {
    pthread_atfork(NULL, NULL, pool_after_fork);
}

int byoc_pool_workers(void) { return n_workers; }
#endif

static long long pool_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static const byoc_rt_api byoc_pool = {pool_threads, pool_parallel, pool_scratch, pool_now};
const void *byoc_pool_api(void) { return &byoc_pool; }

/* For benchmarks: ``reps`` calls over n units of ``work`` dependent multiply-adds each
   (~4 cycles apiece); seconds per call. */
static void busy(void *ctx, long lo, long hi) {
    long work = *(const long *)ctx;
    volatile float sink = 0.0f;
    float v = 1.0f;
    for (long i = lo * work; i < hi * work; i++) v = v * 0.999999f + 1e-7f;
    sink = v;
    (void)sink;
}
double byoc_pool_overhead(long reps, long n, long work) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long r = 0; r < reps; r++) pool_parallel(n, busy, &work);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9) / (double)reps;
}
"""

CDEF = """
void byoc_pool_set_threads(int n);
const void *byoc_pool_api(void);
int byoc_pool_workers(void);
double byoc_pool_overhead(long reps, long n, long work);
"""

_lock = threading.Lock()
_pool = None


def module():
    """The pool's cffi module, built (or found in the cache) and loaded once per process."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = build_cache.build(SOURCE, CDEF, region="byoc thread pool")
        return _pool


def attach(region_module, pool=None) -> None:
    """Point a region module's ``byoc_rt`` at the pool (``pool``: another build of the API,
    for benchmarks)."""
    pool = pool or module()
    address = int(pool.ffi.cast("uintptr_t", pool.lib.byoc_pool_api()))
    region_module.lib.byoc_attach(region_module.ffi.cast("void *", address))


def set_threads(n: int) -> None:
    """How many threads the calling thread's next region calls may use."""
    module().lib.byoc_pool_set_threads(n)


def workers() -> int:
    """Threads the pool has made so far (they live for the process)."""
    return module().lib.byoc_pool_workers()

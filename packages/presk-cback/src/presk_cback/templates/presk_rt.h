/* presk_rt.h: the runtime of a C program presk exported (presk export --target c).
 *
 * One arena for every buffer of the entry: presk_alloc takes the next bytes, 64-byte
 * aligned; a host function marks the arena when it starts and releases its own buffers
 * when it returns. The kernels are PRESK_KERNEL functions (static inline, always
 * inlined); PRESK_OMP(x) is `#pragma x` when OpenMP is on (make OPENMP=-fopenmp) and
 * nothing otherwise, so a build without OpenMP is clean and computes the same bits;
 * PRESK_SIMD(x) the same for the simd constructs, on with -fopenmp-simd too.
 */
#ifndef PRESK_RT_H
#define PRESK_RT_H

#include <stddef.h>
#include <stdint.h>

/* GCC's -Wmaybe-uninitialized misreads a narrowed fold's strip (a causal softmax's): its
 * first term is stored from the strip's row under `if (n > 0)`, and the loop just above
 * writes that row whenever n > 0; gcc -Werror would refuse correct code (clang does not
 * warn, and does not know the option) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define PRESK_KERNEL static inline __attribute__((always_inline))
#define PRESK_PRAGMA(x) _Pragma(#x)
/* PRESK_SIMD(x): `#pragma x` for OpenMP's simd constructs, with OpenMP or with its simd
 * constructs alone (-fopenmp-simd -DPRESK_OPENMP_SIMD, the Makefile's SIMD): the loops the
 * layout put in lanes, each lane in its own order (no bit changes) */
#if defined(_OPENMP) || defined(PRESK_OPENMP_SIMD)
#define PRESK_SIMD(x) PRESK_PRAGMA(x)
#else
#define PRESK_SIMD(x)
#endif
#ifdef _OPENMP
#include <omp.h>
#define PRESK_OMP(x) PRESK_PRAGMA(x)
/* at most n threads, and at most those OpenMP may use (OMP_NUM_THREADS) */
static inline int presk_threads(int n) {
    int m = omp_get_max_threads();
    return m < n ? m : n;
}
#else
#define PRESK_OMP(x)
static inline int presk_threads(int n) {
    (void)n;
    return 1;
}
#endif

typedef struct {
    char *base;
    size_t size;
    size_t top;
} presk_arena;

/* 1 when a gather's index was out of range (the kernels set it; the call's outputs are
 * then not the native backend's) */
extern int presk_error;

/* an arena of `size` bytes (exits with a message when the memory is refused) */
void presk_arena_init(presk_arena *arena, size_t size);
void presk_arena_free(presk_arena *arena);
/* the next `bytes` of the arena, rounded up to 64 (exits when the arena is too small) */
void *presk_alloc(presk_arena *arena, size_t bytes);
size_t presk_mark(const presk_arena *arena);
void presk_release(presk_arena *arena, size_t mark);

/* a .psk.d file (version 1): its first sample, `size` bytes, into `sample`; 0 on success,
 * else a message on standard error and 1 */
int presk_read_sample(const char *path, void *sample, size_t size);
/* `header` (a .psk.d header, `header_size` bytes) then `size` bytes of one sample, written
 * to a temporary file beside `path` and renamed (written in place where `path` is not a
 * regular file: /dev/null, a pipe); 0 on success, else a message and 1 */
int presk_write_sample(const char *path, const unsigned char *header, size_t header_size,
                       const void *sample, size_t size);

/* a monotonic clock, in milliseconds */
double presk_now_ms(void);

#endif /* PRESK_RT_H */

/* presk_rt.c: the arena and the .psk.d files of an exported program (presk_rt.h). */
#define _POSIX_C_SOURCE 200809L
#include "presk_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int presk_error = 0;

#define PRESK_ALIGN 64

void presk_arena_init(presk_arena *arena, size_t size) {
    size_t rounded = (size + PRESK_ALIGN - 1) / PRESK_ALIGN * PRESK_ALIGN;
    arena->base = aligned_alloc(PRESK_ALIGN, rounded ? rounded : PRESK_ALIGN);
    if (arena->base == NULL) {
        fprintf(stderr, "presk: cannot allocate an arena of %zu bytes\n", size);
        exit(1);
    }
    arena->size = rounded;
    arena->top = 0;
}

void presk_arena_free(presk_arena *arena) {
    free(arena->base);
    arena->base = NULL;
    arena->size = arena->top = 0;
}

void *presk_alloc(presk_arena *arena, size_t bytes) {
    size_t rounded = (bytes + PRESK_ALIGN - 1) / PRESK_ALIGN * PRESK_ALIGN;
    if (rounded > arena->size - arena->top) {
        fprintf(stderr, "presk: the arena of %zu bytes is too small (a bug of presk export)\n",
                arena->size);
        exit(1);
    }
    void *p = arena->base + arena->top;
    arena->top += rounded;
    return p;
}

size_t presk_mark(const presk_arena *arena) { return arena->top; }

void presk_release(presk_arena *arena, size_t mark) { arena->top = mark; }

static uint32_t presk_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t presk_u64(const unsigned char *p) {
    return (uint64_t)presk_u32(p) | (uint64_t)presk_u32(p + 4) << 32;
}

int presk_read_sample(const char *path, void *sample, size_t size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    unsigned char head[32];
    int ok = fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, "PSKD", 4) == 0;
    if (!ok) {
        fprintf(stderr, "%s: not a .psk.d file\n", path);
        fclose(f);
        return 1;
    }
    if (presk_u32(head + 4) != 1) {
        fprintf(stderr, "%s: a .psk.d file of version %u, not 1\n", path, presk_u32(head + 4));
        fclose(f);
        return 1;
    }
    uint64_t count = presk_u64(head + 12), sample_size = presk_u64(head + 20);
    if (count < 1 || sample_size != size) {
        fprintf(stderr, "%s: samples of %llu bytes, not the %zu bytes of the entry's inputs\n",
                path, (unsigned long long)sample_size, size);
        fclose(f);
        return 1;
    }
    if (fseek(f, (long)presk_u32(head + 8), SEEK_SET) != 0 || fread(sample, 1, size, f) != size) {
        fprintf(stderr, "%s: truncated\n", path);
        fclose(f);
        return 1;
    }
    fclose(f);
    return 0;
}

/* `path` names something that is not a regular file (/dev/null, a pipe, a terminal): it is
 * written in place, since renaming a temporary over it would replace the device itself */
static int presk_special(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

static int presk_write_to(FILE *f, const unsigned char *header, size_t header_size,
                          const void *sample, size_t size) {
    int ok = fwrite(header, 1, header_size, f) == header_size;
    ok = ok && fwrite(sample, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

int presk_write_sample(const char *path, const unsigned char *header, size_t header_size,
                       const void *sample, size_t size) {
    if (presk_special(path)) {
        FILE *f = fopen(path, "wb");
        if (f == NULL || !presk_write_to(f, header, header_size, sample, size)) {
            perror(path);
            return 1;
        }
        return 0;
    }
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (tmp == NULL) {
        fprintf(stderr, "presk: out of memory\n");
        return 1;
    }
    snprintf(tmp, n, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        perror(tmp);
        free(tmp);
        return 1;
    }
    int ok = presk_write_to(f, header, header_size, sample, size);
    if (!ok || rename(tmp, path) != 0) {
        perror(path);
        remove(tmp);
        free(tmp);
        return 1;
    }
    free(tmp);
    return 0;
}

double presk_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

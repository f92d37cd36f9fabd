"""generate.c of an exported program (`presk export --target c --serve`): the generation
loop of `presk serve` (presk_cli.serve) over the exported model, in C.

    generate [-n N] [-t T] [-s SEED] [-w WEIGHTS] (PROMPT | -f FILE | -i IDS)

The loop is presk serve's, step for step (docs/serve.md): the text so far is the prompt's
tokens then the generated ones; its last `window` tokens, padded on the right with token 0,
are the entry's input (θ read once from the weights, a one-sample `.psk.d` of `params M`,
narrowed to the buffers' types as main.c narrows an input); the logits at the window's last
real position, widened to doubles, give the next token: their argmax (the first of equal
ones) at temperature 0, else presk_core.random.sample's draw from softmax(logits / T) with
the key `fold_in(fold_in_name(root_key(seed), "serve"), i)` for token i: its uniform
(presk_uniform, the kernels' Threefry), the softmax and the cumulative sums in MPFR at 256
bits, rounded to nearest as gmpy2 computes them, so the same token. The model is the native
backend's bits (C1), so the tokens are presk serve's on the native backend.
"""

from __future__ import annotations

import math

from presk_core.random import name_words
from presk_kernel.frames import HostFrame
from presk_kernel.ir import Schedule

from presk_cback.emit import CTYPE, PRELUDE
from presk_cback.export_main import BF16_HELPERS, FILE_CTYPE, NARROW, WIDEN

SAMPLE_BITS = 256  # presk_core.random.BITS: sample's softmax on doubles


def _threefry() -> str:
    """The kernels' Threefry and uniform (emit.PRELUDE): the same functions, not copies."""
    start = PRELUDE.index("/* Threefry-2x32-20")
    word = PRELUDE.index("static inline int64_t presk_key_word", start)
    uniform = PRELUDE.index("static inline double presk_uniform", word)
    end = PRELUDE.index("static inline uint8_t presk_bernoulli", uniform)
    return PRELUDE[start:word] + PRELUDE[uniform:end]


def _utf8(c: str) -> str:
    return '"' + "".join(f"\\x{b:02x}" for b in c.encode("utf-8")) + '"'


def generate_c(
    schedule: Schedule,
    frame: HostFrame,
    cname: str,
    vocab: list[str],
    window: int,
    defaults: tuple[int, float],
    how: str,
) -> str:
    """generate.c for the entry `cname` (its frame `frame`: θ's leaves, then the window of
    token ids; its first output the logits [1, window, V]); `defaults` the block's tokens
    and temperature, `how` the realization as the summary line says it (`f64`)."""
    hb = {b.id: b for b in schedule.buffers}
    *theta, ids = schedule.inputs
    if hb[ids].dtype != "i64" or math.prod(a.length for a in hb[ids].axes) != window:
        raise ValueError(f"`{cname}`'s last input is not a window of {window} token ids")
    logits = hb[schedule.outputs[0]]
    if math.prod(a.length for a in logits.axes) != window * len(vocab):
        raise ValueError(f"`{cname}`'s first output is not the logits of {window} positions")
    read, at = [], 0
    for b, p in zip(theta, frame.params, strict=False):
        n = math.prod(a.length for a in hb[b].axes)
        dt, ct = hb[b].dtype, CTYPE[hb[b].dtype]
        if dt in ("i64", "bool"):
            raise ValueError(f"θ's leaf `{p.name}` is not of reals")
        read += [
            "{",
            f"    {ct} *p = presk_alloc(&arena, {n} * sizeof({ct}));",
            f"    for (int64_t i = 0; i < {n}; i++) {{",
            "        double x;",
            f"        memcpy(&x, theta + {at} + i * sizeof x, sizeof x);",
            f"        p[i] = {NARROW.get(dt, 'x')};",
            "    }",
            f"    in.{p.name} = p;",
            "}",
        ]
        at += n * 8
    bf16 = any(hb[b].dtype == "bf16" for b in (*theta, logits.id))
    tokens, temperature = defaults
    return GENERATE.format(
        cname=cname,
        window=window,
        vocab=len(vocab),
        theta_bytes=at,
        codes=",\n    ".join(
            ", ".join(str(ord(c)) for c in vocab[i : i + 16]) for i in range(0, len(vocab), 16)
        ),
        texts=",\n    ".join(
            ", ".join(_utf8(c) for c in vocab[i : i + 8]) for i in range(0, len(vocab), 8)
        ),
        words=", ".join(f"{w}u" for w in name_words("serve")),
        nwords=len(name_words("serve")),
        ids_name=frame.params[len(theta)].name,
        ids_ct=FILE_CTYPE["i64"],
        out_name=frame.results[0].name,
        widen=WIDEN.get(logits.dtype, ""),
        read="\n".join("    " + x for x in read),
        tokens=tokens,
        temperature=repr(float(temperature)),
        bits=SAMPLE_BITS,
        how=how,
        helpers=BF16_HELPERS if bf16 else "",
        threefry=_threefry(),
    )


GENERATE = r"""/* generate.c: `generate [-n N] [-t T] [-s SEED] [-w WEIGHTS] (PROMPT | -f FILE | -i IDS)`,
 * the generation loop of `presk serve` over {cname} (presk export --target c --serve):
 * prints the prompt, then each token as it comes, a newline, and the rate on stderr. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gmp.h>
#include <mpfr.h>
#include "model.h"

#define PRESK_WINDOW {window}
#define PRESK_VOCAB {vocab}
#define PRESK_THETA_BYTES {theta_bytes}
#define PRESK_TOKENS {tokens} /* the block's max_tokens (or presk serve's 32) */
#define PRESK_MAX_TOKENS 1000000
/* the characters of the vocabulary (code points), and each as UTF-8 */
static const uint32_t presk_codes[PRESK_VOCAB] = {{
    {codes}
}};
static const char *const presk_texts[PRESK_VOCAB] = {{
    {texts}
}};
/* fold_in_name(key, "serve"): the words folded in (presk_core.random.name_words) */
static const uint32_t presk_serve_words[{nwords}] = {{{words}}};
{helpers}
{threefry}
static void presk_fold_in(uint32_t key[2], uint32_t d) {{ /* the hash of the counter (0, d) */
    uint64_t y = presk_threefry(key[0], key[1], d);
    key[0] = (uint32_t)(y >> 32);
    key[1] = (uint32_t)y;
}}

/* presk_core.random.sample of one row: the first index whose cumulative probability exceeds
 * u, the softmax (exps of x - max, their left fold, each quotient) and the cumulative sums
 * in MPFR at {bits} bits, rounded to nearest; the last index of positive probability where
 * rounding leaves the sum below u */
static int64_t presk_sample(const double *row, int64_t n, double u) {{
    double m = row[0];
    for (int64_t j = 1; j < n; j++) m = row[j] > m ? row[j] : m;
    mpfr_t top, total, p, cum, *e = malloc((size_t)n * sizeof *e);
    if (e == NULL) {{
        fprintf(stderr, "generate: out of memory\n");
        exit(1);
    }}
    mpfr_inits2({bits}, top, total, p, cum, (mpfr_ptr)0);
    mpfr_set_d(top, m, MPFR_RNDN);
    for (int64_t j = 0; j < n; j++) {{
        mpfr_init2(e[j], {bits});
        mpfr_set_d(e[j], row[j], MPFR_RNDN);
        mpfr_sub(e[j], e[j], top, MPFR_RNDN);
        mpfr_exp(e[j], e[j], MPFR_RNDN);
    }}
    mpfr_set(total, e[0], MPFR_RNDN);
    for (int64_t j = 1; j < n; j++) mpfr_add(total, total, e[j], MPFR_RNDN);
    int64_t token = -1, last = 0;
    for (int64_t j = 0; j < n && token < 0; j++) {{
        mpfr_div(p, e[j], total, MPFR_RNDN);
        if (j == 0) mpfr_set(cum, p, MPFR_RNDN);
        else mpfr_add(cum, cum, p, MPFR_RNDN);
        if (mpfr_sgn(p) > 0) last = j;
        if (mpfr_cmp_d(cum, u) > 0) token = j;
    }}
    for (int64_t j = 0; j < n; j++) mpfr_clear(e[j]);
    mpfr_clears(top, total, p, cum, (mpfr_ptr)0);
    free(e);
    return token < 0 ? last : token;
}}

static void presk_usage(const char *name) {{
    fprintf(stderr, "usage: %s [-n TOKENS] [-t TEMPERATURE] [-s SEED] [-w WEIGHTS.psk.d]"
                    " (PROMPT | -f FILE | -i ID,ID,...)\n", name);
    exit(2);
}}

/* a UTF-8 text's tokens (each character's position in the vocabulary); 0 on success */
static int presk_encode(const char *text, int64_t *tokens, int64_t *count) {{
    const unsigned char *s = (const unsigned char *)text;
    int64_t n = 0, line = 1, column = 1;
    while (*s) {{
        uint32_t c = *s;
        int more = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
        if (more < 0) goto bad;
        c &= more ? 0x3Fu >> more : 0x7Fu;
        for (int k = 1; k <= more; k++) {{
            if ((s[k] & 0xC0) != 0x80) goto bad;
            c = c << 6 | (s[k] & 0x3Fu);
        }}
        int64_t t = -1;
        for (int64_t j = 0; j < PRESK_VOCAB; j++)
            if (presk_codes[j] == c) {{ t = j; break; }}
        if (t < 0) {{
            fprintf(stderr, "generate: the prompt line %lld, column %lld: U+%04X is not in the"
                            " vocabulary\n", (long long)line, (long long)column, (unsigned)c);
            return 1;
        }}
        tokens[n++] = t;
        if (c == '\n') {{ line++; column = 1; }} else column++;
        s += 1 + more;
    }}
    *count = n;
    return 0;
bad:
    fprintf(stderr, "generate: the prompt is not UTF-8 text\n");
    return 1;
}}

static char *presk_read_file(const char *path) {{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {{
        perror(path);
        exit(1);
    }}
    size_t size = 0, cap = 4096;
    char *text = malloc(cap);
    for (size_t got; text != NULL && (got = fread(text + size, 1, cap - size - 1, f)) > 0;) {{
        size += got;
        if (cap - size - 1 == 0) text = realloc(text, cap *= 2);
    }}
    if (text == NULL) {{
        fprintf(stderr, "generate: out of memory\n");
        exit(1);
    }}
    if (f != stdin) fclose(f);
    text[size] = 0;
    if (size >= 2 && text[size - 2] == '\r' && text[size - 1] == '\n') text[size - 2] = 0;
    else if (size >= 1 && text[size - 1] == '\n') text[size - 1] = 0;
    return text;
}}

int main(int argc, char **argv) {{
    long tokens = PRESK_TOKENS;
    double temperature = {temperature};
    uint64_t seed = 0;
    const char *weights = NULL, *prompt = NULL, *file = NULL, *ids = NULL;
    for (int i = 1; i < argc; i++) {{
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0 || a[2] != 0) {{
            if (prompt != NULL) presk_usage(argv[0]);
            prompt = a;
            continue;
        }}
        if (i + 1 >= argc) presk_usage(argv[0]);
        const char *v = argv[++i];
        char *end;
        errno = 0;
        switch (a[1]) {{
        case 'n':
            tokens = strtol(v, &end, 10);
            if (*end || errno || tokens < 1 || tokens > PRESK_MAX_TOKENS) {{
                fprintf(stderr, "generate: -n %s: a count of tokens from 1 to %d\n", v,
                        PRESK_MAX_TOKENS);
                return 2;
            }}
            break;
        case 't':
            temperature = strtod(v, &end);
            if (*end || !(temperature == 0 || (isfinite(temperature) && temperature >= DBL_MIN))) {{
                fprintf(stderr, "generate: -t %s: a temperature is 0 (greedy) or a normal"
                                " double from %g\n", v, DBL_MIN);
                return 2;
            }}
            break;
        case 's':
            if (v[0] == '-') {{
                long long s = strtoll(v, &end, 10);
                seed = (uint64_t)s;
            }} else {{
                seed = strtoull(v, &end, 10);
            }}
            if (*end || errno || !*v) {{
                fprintf(stderr, "generate: -s %s: a seed is a 64-bit integer\n", v);
                return 2;
            }}
            break;
        case 'w': weights = v; break;
        case 'f': file = v; break;
        case 'i': ids = v; break;
        default: presk_usage(argv[0]);
        }}
    }}
    if ((prompt != NULL) + (file != NULL) + (ids != NULL) != 1) presk_usage(argv[0]);
    char *owned = NULL;
    if (weights == NULL) {{ /* weights.psk.d beside the program */
        const char *slash = strrchr(argv[0], '/');
        size_t dir = slash == NULL ? 0 : (size_t)(slash - argv[0]) + 1;
        owned = malloc(dir + sizeof "weights.psk.d");
        if (owned == NULL) return 1;
        memcpy(owned, argv[0], dir);
        strcpy(owned + dir, "weights.psk.d");
        weights = owned;
    }}
    size_t room = (file != NULL ? 0 : strlen(prompt != NULL ? prompt : ids)) + 1;
    char *text = file != NULL ? presk_read_file(file) : NULL;
    if (text != NULL) room = strlen(text) + 1;
    int64_t *all = malloc((room + (size_t)tokens) * sizeof *all), count = 0;
    unsigned char *theta = NULL;
    int status = 0;
    if (all == NULL) {{
        status = 1;
        goto done;
    }}
    if (ids != NULL) {{
        for (const char *s = ids; *s;) {{
            char *end;
            errno = 0;
            long long t = strtoll(s, &end, 10);
            if (end == s || errno || t < 0 || t >= PRESK_VOCAB || (*end && *end != ',')) {{
                fprintf(stderr, "generate: -i %s: token ids from 0 to %d, separated by commas\n",
                        ids, PRESK_VOCAB - 1);
                status = 2;
                goto done;
            }}
            all[count++] = t;
            s = *end == ',' ? end + 1 : end;
        }}
    }} else if (presk_encode(text != NULL ? text : prompt, all, &count)) {{
        status = 1;
        goto done;
    }}
    if (count == 0) {{
        fprintf(stderr, "generate: the text to continue: at least one character\n");
        status = 2;
        goto done;
    }}
    theta = malloc(PRESK_THETA_BYTES + 1);
    if (theta == NULL || presk_read_sample(weights, theta, PRESK_THETA_BYTES)) {{
        status = 1;
        goto done;
    }}
    presk_arena arena;
    presk_arena_init(&arena, PRESK_ARENA_BYTES);
    {cname}_in in;
    {cname}_out out;
{read}
    free(theta);
    theta = NULL;
    {ids_ct} *window = presk_alloc(&arena, PRESK_WINDOW * sizeof *window);
    in.{ids_name} = window;
    const size_t mark = presk_mark(&arena);
    uint32_t base[2] = {{(uint32_t)(seed >> 32), (uint32_t)seed}};
    for (size_t w = 0; w < sizeof presk_serve_words / sizeof *presk_serve_words; w++)
        presk_fold_in(base, presk_serve_words[w]);
    if (ids != NULL)
        for (int64_t j = 0; j < count; j++) fputs(presk_texts[all[j]], stdout);
    else
        fputs(text != NULL ? text : prompt, stdout);
    fflush(stdout);
    double row[PRESK_VOCAB], scaled[PRESK_VOCAB];
    double t0 = presk_now_ms();
    for (long i = 0; i < tokens; i++) {{
        int64_t len = count < PRESK_WINDOW ? count : PRESK_WINDOW;
        for (int64_t j = 0; j < PRESK_WINDOW; j++) window[j] = j < len ? all[count - len + j] : 0;
        presk_release(&arena, mark);
        {cname}(&arena, &in, &out);
        if (presk_error) {{
            fprintf(stderr, "generate: an index out of range in {cname}\n");
            status = 1;
            break;
        }}
        int finite = 1;
        for (int64_t v = 0; v < PRESK_VOCAB; v++) {{
            row[v] = {widen}(out.{out_name}[(len - 1) * PRESK_VOCAB + v]);
            finite = finite && isfinite(row[v]);
        }}
        if (!finite) {{
            fprintf(stderr, "generate: the logits of generated token %ld are not all finite\n", i);
            status = 1;
            break;
        }}
        int64_t token = 0;
        if (temperature == 0) {{ /* greedy: the first of the largest */
            for (int64_t v = 1; v < PRESK_VOCAB; v++) token = row[v] > row[token] ? v : token;
        }} else {{
            int over = 0;
            for (int64_t v = 0; v < PRESK_VOCAB; v++) {{
                scaled[v] = row[v] / temperature;
                over = over || !isfinite(scaled[v]);
            }}
            if (over) {{ /* shifted by the largest first, which the softmax does not change */
                double m = row[0];
                for (int64_t v = 1; v < PRESK_VOCAB; v++) m = row[v] > m ? row[v] : m;
                for (int64_t v = 0; v < PRESK_VOCAB; v++) scaled[v] = (row[v] - m) / temperature;
            }}
            uint32_t key[2] = {{base[0], base[1]}};
            presk_fold_in(key, (uint32_t)i);
            token = presk_sample(scaled, PRESK_VOCAB, presk_uniform(key[0], key[1], 0));
        }}
        all[count++] = token;
        fputs(presk_texts[token], stdout);
        fflush(stdout);
    }}
    double seconds = (presk_now_ms() - t0) / 1e3;
    putchar('\n');
    fflush(stdout);
    presk_arena_free(&arena);
    if (status) goto done;
    if (temperature == 0)
        fprintf(stderr, "generate: %ld tokens in %.3f s, %.1f tokens/s (C {how}, greedy, window %d)\n",
                tokens, seconds, seconds > 0 ? tokens / seconds : INFINITY, PRESK_WINDOW);
    else
        fprintf(stderr, "generate: %ld tokens in %.3f s, %.1f tokens/s (C {how}, temperature %g,"
                        " seed %llu, window %d)\n", tokens, seconds,
                seconds > 0 ? tokens / seconds : INFINITY, temperature, (unsigned long long)seed,
                PRESK_WINDOW);
done:
    free(theta);
    free(all);
    free(text);
    free(owned);
    return status;
}}
"""


__all__ = ["generate_c"]

"""`presk data`: produce and inspect `.psk.d` data files (presk_core.data), and turn a text
into windows of tokens (presk_core.text); docs/data.md."""

from __future__ import annotations

import sys

import click
from presk_syntax.diagnostics import Diagnostic, Severity, emit
from presk_syntax.span import SourceMap

from presk_cli.commands import Count


def _data_fail(e: Exception, code: str | None = None) -> None:
    emit([Diagnostic(getattr(e, "code", code or "E7004"), Severity.ERROR, str(e))], SourceMap())
    sys.exit(1)


def _os_fail(verb: str, path: str, e: OSError) -> None:
    """E7004: the system refused to read or write `path`."""
    _data_fail(Exception(f"cannot {verb} `{path}`: {(e.strerror or str(e)).lower()}"))


def _type_of(text: str, where: str | None = None):
    from presk_core.data import DataError
    from presk_core.data import type_of as data_type_of

    try:
        return data_type_of(text, where)
    except DataError as e:
        _data_fail(e)


@click.group(short_help="Produce and inspect `.psk.d` data files")
def data() -> None:
    """Produce and inspect `.psk.d` data files; turn a text into windows of tokens
    (docs/data.md)."""


@data.command("pack")
@click.argument("text", type=click.Path(dir_okay=False))
@click.option("--type", "type_text", required=True, help="The type of one sample.")
@click.option(
    "-o", "out", required=True, type=click.Path(dir_okay=False), help="The file to write."
)
def data_pack(text: str, type_text: str, out: str) -> None:
    """Pack TEXT, numbers separated by blanks (a sample a line, by custom), into a .psk.d file
    of samples of the given type."""
    from presk_core.data import DataError, parse_samples
    from presk_core.data import write as write_data

    t = _type_of(type_text)
    try:
        numbers = open(text, encoding="utf-8").read().split()
    except (OSError, UnicodeDecodeError) as e:
        _data_fail(Exception(f"cannot read `{text}`: {e}"))
    try:
        samples = parse_samples(numbers, t, text)
    except DataError as e:
        _data_fail(e)
    try:
        write_data(out, str(t), t, samples)
    except OSError as e:
        _os_fail("write", out, e)
    click.echo(f"presk data: wrote {out} ({len(samples)} samples of type {t})")


def _sample_text(values: list, t) -> str:
    import numpy as np
    from presk_types.types import TupleT

    parts = [
        repr(v.tolist()) if v.dtype != np.uint8 else repr(v.astype(bool).tolist()) for v in values
    ]
    parts = [p.replace("True", "true").replace("False", "false") for p in parts]
    return "(" + ", ".join(parts) + ")" if isinstance(t, TupleT) else parts[0]


@data.command("info")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--limit", type=Count(0), default=10, show_default=True, help="Samples shown.")
def data_info(file: str, limit: int) -> None:
    """The type, count, version and sample size of FILE, then its first samples."""
    from presk_core.data import DataError, leaves, read_header, read_reals
    from presk_core.data import read as read_data

    try:
        header = read_header(file)
        if header.type_text.startswith("params "):  # a parameter tree: its reals in order
            reals = read_reals(file)  # first: E7010 before a line is printed
            click.echo(f"type    {header.type_text}")
            click.echo(f"count   {header.count}")
            click.echo(f"version {header.version}")
            click.echo(f"sample  {header.sample_size} bytes, {header.sample_size // 8} reals")
            click.echo(f"[0] {reals[:limit].tolist()}" + (" …" if reals.size > limit else ""))
            return
        t = _type_of(header.type_text, file)
        samples = read_data(file, t)
    except DataError as e:
        _data_fail(e)
    spec = leaves(t)
    click.echo(f"type    {header.type_text}")
    click.echo(f"count   {header.count}")
    click.echo(f"version {header.version}")
    click.echo(f"sample  {header.sample_size} bytes, {len(spec)} leaves")
    for i, sample in enumerate(samples[:limit]):
        click.echo(f"[{i}] {_sample_text(sample, t)}")
    if len(samples) > limit:
        click.echo(f"… ({len(samples) - limit} more)")


@data.command("diff")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
def data_diff(a: str, b: str) -> None:
    """‖a − b‖₂, ‖a‖₂ and their ratio over the reals of two files of the same type."""
    import math

    import numpy as np
    from presk_core.data import DataError, read_header, read_reals
    from presk_core.data import read as read_data
    from presk_core.show import format_exp

    try:
        ha, hb = read_header(a), read_header(b)
        if (ha.type_text, ha.count) != (hb.type_text, hb.count):
            raise DataError(
                "E7007",
                f"`{a}` holds {ha.count} of `{ha.type_text}`, `{b}` {hb.count} of `{hb.type_text}`",
            )
        if ha.type_text.startswith("params "):
            xa, xb = [read_reals(a)], [read_reals(b)]
        else:
            t = _type_of(ha.type_text, a)
            xa = [v for s in read_data(a, t) for v in s if v.dtype == np.float64]
            xb = [v for s in read_data(b, t) for v in s if v.dtype == np.float64]
    except DataError as e:
        _data_fail(e)
    va = np.concatenate([v.ravel() for v in xa]) if xa else np.zeros(0)
    vb = np.concatenate([v.ravel() for v in xb]) if xb else np.zeros(0)
    dist = math.sqrt(math.fsum((va - vb) ** 2))
    norm = math.sqrt(math.fsum(va**2))
    rel = dist / norm if norm else float("inf") if dist else 0.0
    click.echo(
        f"presk data: ‖a − b‖₂ {format_exp(dist, 6)}   ‖a‖₂ {format_exp(norm, 6)}   relative {format_exp(rel, 6)}"
        f"   over {va.size} reals"
    )


@data.command("convert", short_help="Weights to and from safetensors and .npz")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option(
    "-o", "out", required=True, type=click.Path(dir_okay=False), help="The file to write."
)
@click.option(
    "--like",
    type=click.Path(dir_okay=False),
    metavar="CKPT",
    help="A checkpoint of the model (a .psk.d of params M): the tree to fit, for a .psk.d out.",
)
def data_convert(source: str, out: str, like: str | None) -> None:
    """Convert a parameter checkpoint (.psk.d) to safetensors or .npz, or back (formats by
    extension): the tree's paths are the tensors' names; a stacked leaf is one tensor, or
    read from its blocks' PyTorch names (`blocks.0.proj.w`)."""
    from presk_cli.convert import FORMATS, WeightsError, convert, format_of

    for path, hint in ((source, "SOURCE"), (out, "-o")):
        if format_of(path) is None:
            raise click.BadParameter(
                f"`{path}`: a weights file ends in {', '.join(FORMATS)}", param_hint=hint
            )
    if like is None and format_of(out) == ".psk.d" and format_of(source) != ".psk.d":
        raise click.UsageError(f"writing `{out}` needs the model's tree: give --like CKPT.psk.d")
    try:
        click.echo(convert(source, out, like))
    except WeightsError as e:
        _data_fail(e)


def _read_text(path: str) -> str:
    """A text file's characters exactly (UTF-8, line ends kept); E7004 when it cannot be."""
    from presk_core.data import DataError

    try:
        blob = open(path, "rb").read()
    except OSError as e:
        _os_fail("read", path, e)
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as e:
        line = blob.count(b"\n", 0, e.start) + 1
        _data_fail(
            DataError(
                "E7004",
                f"`{path}` is not UTF-8 text: byte 0x{blob[e.start]:02x} at offset {e.start}"
                f" (line {line})",
            )
        )


def _write_text(path: str, text: str) -> None:
    from presk_core.data import write_bytes

    try:
        write_bytes(path, text.encode("utf-8"))
    except OSError as e:
        _os_fail("write", path, e)


OUT = click.option(
    "-o", "out", required=True, type=click.Path(dir_okay=False), help="The file to write."
)
VOCAB_SIZE = click.option(
    "--vocab",
    "vocab_size",
    required=True,
    type=Count(1, 2**63 - 1),
    help="The vocabulary's size V: every token is below it.",
)


@data.command("chars", short_help="The vocabulary of a text: its characters, a JSON array")
@click.argument("text", type=click.Path(dir_okay=False))
@OUT
def data_chars(text: str, out: str) -> None:
    """The vocabulary of TEXT: its distinct characters (not bytes), sorted by code point,
    as a JSON array."""
    from presk_core.text import count, vocabulary, vocabulary_json

    content = _read_text(text)
    vocab = vocabulary(content)
    _write_text(out, vocabulary_json(vocab))
    click.echo(
        f"presk data: wrote {out} ({count(len(vocab), 'character')} over {len(content)} of text)"
    )


@data.command("encode", short_help="A text as tokens, by a vocabulary")
@click.argument("text", type=click.Path(dir_okay=False))
@click.option(
    "--vocab",
    "vocab_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The vocabulary, a JSON array of characters (`presk data chars`).",
)
@OUT
def data_encode(text: str, vocab_file: str, out: str) -> None:
    """The tokens of TEXT, each character's position in the vocabulary, as decimal numbers
    separated by blanks."""
    from presk_core.data import DataError
    from presk_core.text import count, encode, format_tokens, parse_vocabulary

    try:
        vocab = parse_vocabulary(_read_text(vocab_file), vocab_file)
        tokens = encode(_read_text(text), vocab, text, vocab_file)
    except DataError as e:
        _data_fail(e)
    _write_text(out, format_tokens(tokens))
    click.echo(
        f"presk data: wrote {out} ({count(len(tokens), 'token')} over a vocabulary of {len(vocab)})"
    )


@data.command("lm-windows", short_help="Windows of tokens and their next tokens, a .psk.d file")
@click.argument("tokens", type=click.Path(dir_okay=False))
@VOCAB_SIZE
@click.option("--seq", required=True, type=Count(1), help="The window's length T.")
@OUT
def data_lm_windows(tokens: str, vocab_size: int, seq: int, out: str) -> None:
    """Windows of a token file for a language model: samples (x, y) of type
    (idx[V][seq: T], idx[V][seq: T]), y being x shifted by one token, side by side."""
    from presk_core.data import DataError
    from presk_core.data import write as write_data
    from presk_core.text import count, lm_windows, parse_tokens

    try:
        stream = parse_tokens(_read_text(tokens), tokens)
        type_text, samples = lm_windows(stream, vocab_size, seq, tokens)
    except DataError as e:
        _data_fail(e)
    t = _type_of(type_text)
    try:
        write_data(out, str(t), t, samples)
    except OSError as e:
        _os_fail("write", out, e)
    click.echo(
        f"presk data: wrote {out} ({count(len(samples), 'window')} of type {t}"
        f" from {count(len(stream), 'token')})"
    )


@data.command("ngrams", short_help="Contexts of K tokens and the token after each, a .psk.d file")
@click.argument("tokens", type=click.Path(dir_okay=False))
@VOCAB_SIZE
@click.option(
    "--context",
    required=True,
    type=Count(1),
    help="The tokens K before each target: 1 for pairs.",
)
@click.option("--limit", type=Count(1), help="Keep the first N samples only.")
@OUT
def data_ngrams(tokens: str, vocab_size: int, context: int, limit: int | None, out: str) -> None:
    """The n-grams of a token file: samples (x, y), x the K tokens before a target y, one a
    position; of type (idx[V][], idx[V][]) for K = 1 (a bigram's pairs), else
    (idx[V][ctx: K], idx[V][])."""
    import numpy as np
    from presk_core.data import DataError, write_rows
    from presk_core.text import count, ngrams, parse_tokens

    try:
        stream = parse_tokens(_read_text(tokens), tokens)
        type_text, x, y = ngrams(stream, vocab_size, context, limit, tokens)
    except DataError as e:
        _data_fail(e)
    t = _type_of(type_text)
    try:
        write_rows(out, str(t), t, np.column_stack([x, y]))
    except OSError as e:
        _os_fail("write", out, e)
    what = count(len(y), "pair" if context == 1 else "context") + (
        "" if context == 1 else f" of {context}"
    )
    click.echo(f"presk data: wrote {out} ({what} of type {t} from {count(len(stream), 'token')})")


__all__ = ["data"]

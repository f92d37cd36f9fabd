"""presk-syntax's passes: `tokens` and `ast` (the first of the pipeline), and the `ast`
document the stage program `presk-parse` writes (presk_syntax.pipeline)."""

from __future__ import annotations

from presk_syntax.pipeline import Context, Document, Parsed, Pass, StageProgram, Text


def parse_pass(path: str, ctx: Context) -> Parsed:
    """The pass `ast`: a file's source and tree; DiagnosticError on a syntax error."""
    from presk_syntax.parse import parse_source, read_source

    source = ctx.sources.add(read_source(path))
    ctx.files = [source]
    return Parsed(source, parse_source(source))


def tokens_pass(path: str, ctx: Context) -> Text:
    """The pass `tokens`: a file's tokens, a line each."""
    from presk_syntax.dump import tokens
    from presk_syntax.parse import parse_tree, read_source

    source = ctx.sources.add(read_source(path))
    data = source.text.encode("utf-8")
    return Text("\n".join(tokens(parse_tree(data), data)) + "\n")


def read_ast(data: bytes, ctx: Context) -> Parsed:
    from presk_syntax.codec import decode_ast

    tree, files = decode_ast(data)
    ctx.files = list(files.sources)
    return Parsed(files.sources[0], tree)


def write_ast(value: Parsed, ctx: Context) -> bytes:
    from presk_syntax.codec import encode_ast

    return encode_ast(value.tree, value.source)


AST = Document("ast", read_ast, write_ast)

TOKENS = Pass(
    "tokens",
    'the token stream (Kw(Module) @ 77..83, Ident("Linear") @ 84..90, …)',
    str,
    Text,
    None,
    tokens_pass,
)
PARSE = Pass(
    "ast", "the syntax tree", str, Parsed, None, parse_pass, StageProgram("presk-parse", None, AST)
)

PASSES: tuple[Pass, ...] = (TOKENS, PARSE)

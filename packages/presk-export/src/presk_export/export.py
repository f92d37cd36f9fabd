"""`presk export --target pytorch`: the files of an export, checked, then written whole."""

from __future__ import annotations

import os

from presk_core.data import write_text
from presk_core.lower import lower_checked
from presk_types.elab import Program

from presk_export.conformance import conformance_files
from presk_export.pyformat import lay_out
from presk_export.pytorch import Export, Options
from presk_export.serve_export import serve_files
from presk_export.train_export import train_files, train_steps


def export_pytorch(
    program: Program,
    options: Options,
    entry: str | None = None,
    dims: dict[str, int] | None = None,
    seed: int = 0,
    bits: int = 256,
    out: str | None = None,
    data: str | None = None,
    notes: list | None = None,
    serve: bool = False,
) -> dict[str, str]:
    """Relative path -> text of every file of the export: one Python file per Presk file,
    and with an entry its conformance test and data; with the entry `train:K`, the training
    run as train.py and its K-step conformance test (presk_export.train_export), naming the
    data file relative to `out`, the export's folder, when given. DiagnosticError for a
    program with errors, ExportError for a construct the export cannot write, EntryError for
    a bad entry. A function the export cannot write is left out, with whatever calls it (a
    comment in its place, and a W8001 in `notes`); an entry that reaches one is E8001. With
    `serve`, the file's `inference serve` as serve.py (presk_export.serve_export)."""
    core, infos = lower_checked(program)
    export = Export(program, core, infos, options)
    files = export.files()
    if notes is not None:
        notes.extend(export.notes())
    if entry is not None and (steps := train_steps(entry)) is not None:
        files.update(train_files(export, steps, dims or {}, seed, bits, out, data))
    elif entry is not None:
        files.update(conformance_files(export, entry, dims or {}, seed, bits))
    if serve:
        files.update(serve_files(export, out))
    for name, text in files.items():
        if name.endswith(".py"):
            files[name] = lay_out(text)
            compile(files[name], name, "exec")  # a SyntaxError here is a bug of the export
    return files


def write_files(out: str, files: dict[str, str]) -> list[str]:
    """Write each file whole (presk_core.data.atomic: a temporary file, then a rename), after
    every text exists: a failed export leaves nothing half-written. Each is created as `open`
    creates a file, 0666 less the umask, as presk's own files are. The paths, in order."""
    written = []
    for name, text in files.items():
        path = os.path.join(out, name)
        write_text(path, text)
        written.append(path)
    return written


__all__ = ["Options", "export_pytorch", "write_files"]

"""Presk from Python (docs/python.md): load a file, call its entries on numpy arrays, train
its `training run`, read and write `.psk.d` files.

    import presk
    program = presk.load("tutorial/07_train.psk")
    loss = program.entry("loss", backend="native")
    value = loss(program.init("Tower"), (x, y))      # a float64 array of shape ()

Shipped by presk-cli; the functions are presk_cli.api's and presk_cli.pydata's.
"""

from presk_cli import __version__
from presk_cli.api import Entry, PreskError, Program, load
from presk_cli.pydata import read_data, write_data

__all__ = ["Entry", "PreskError", "Program", "__version__", "load", "read_data", "write_data"]

"""The e-graph optimizer: PSK-Core through egglog and back (docs/optimizer.md)."""

__version__ = "0.1.0"

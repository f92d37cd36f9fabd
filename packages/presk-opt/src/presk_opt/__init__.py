"""The e-graph optimizer: PSK-Core through egglog and back (docs/optimizer.md)."""

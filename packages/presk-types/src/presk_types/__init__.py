"""presk-types: elaboration and checking: constants, instances, shapes, regularity, effects."""

__version__ = "0.1.0"

"""The flags' value types that several commands share."""

from __future__ import annotations

import re

import click


class Count(click.IntRange):
    """An integer flag in ASCII digits, an optional sign before (`int` reads `١٢` as 12)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
            self.fail(f"{value!r} is not an integer in ASCII digits", param, ctx)
        if isinstance(value, str) and len(value.strip().lstrip("+-")) > 40:  # int() stops at 4300
            self.fail(f"{value.strip()[:20]}… is out of range", param, ctx)
        return super().convert(value, param, ctx)

"""Shape algebra: broadcasting, contraction, `ein`, and equality of lengths for all dimensions.

Every equality of lengths is decided with `presburger.holds_for_all` in the function's
dimension context (its dimensions, their bounds, all ≥ 0); a failure carries the
counterexample the diagnostics print (`differ for In = 1, Out = 0`).
"""

from __future__ import annotations

from dataclasses import dataclass

from presk_syntax.diagnostics import Diagnostic, Label, Severity
from presk_syntax.span import Span

from presk_types.presburger import DimContext, Eq, Formula, Lin, Lt, Or, dims_of, holds_for_all
from presk_types.types import AxisT, Shape


class TypeErr(Exception):
    """A typing error: the diagnostics that stop the checking of one function."""

    def __init__(self, *diagnostics: Diagnostic) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(d.message for d in diagnostics))


def err(
    code: str, message: str, *labels: Label, help: str | None = None, note: str | None = None
) -> TypeErr:
    return TypeErr(Diagnostic(code, Severity.ERROR, message, tuple(labels), help, note))


@dataclass
class Lengths:
    """Decides equalities of lengths in one function's dimension context."""

    ctx: DimContext

    def differ(self, a: Lin, b: Lin, broadcast: bool = False) -> str | None:
        """None when a == b for all dimensions, else the counterexample's text: where both
        are natural (and neither 1, in a broadcast) when there is such a point."""
        if a == b:
            return None
        ctx = self.ctx
        for name in sorted((a.names | b.names) - set(ctx.names)):
            ctx = ctx.with_dim(name)  # a dimension of another scope: any natural
        counter = holds_for_all(ctx, Eq(a, b))
        if counter is None:
            return None
        low = 2 if broadcast else 0  # in a broadcast, a length 1 would read as broadcasting
        if len(counter) and any(x.value(counter) < low for x in (a, b)):
            # a real mismatch if there is one: the smallest point where both are lengths
            real = holds_for_all(ctx, Or(Eq(a, b), Lt(a, low), Lt(b, low)))
            counter = real if real is not None else counter
        return str(counter) if len(counter) else "these constants"

    def fails(self, f: Formula) -> str | None:
        """None when f holds for every value of the dimensions, else the counterexample's
        text (empty when f mentions no dimension)."""
        ctx = self.ctx
        for name in sorted(dims_of(f) - set(ctx.names)):
            ctx = ctx.with_dim(name)  # a dimension of another scope: any natural
        counter = holds_for_all(ctx, f)
        if counter is None:
            return None
        return str(counter) if len(counter) else ""

    def require_equal(self, a: Lin, b: Lin, span: Span, broadcast: bool = False) -> None:
        """E2006 unless a == b for every value of the dimensions."""
        where = self.differ(a, b, broadcast)
        if where is not None:
            raise err(
                "E2006",
                f"dimension mismatch: `{a}` vs `{b}`",
                Label(span, f"differ for {where}" if where != "these constants" else "differ"),
            )


def _one(e: Lin) -> bool:
    return e.is_const and e.constant == 1


def broadcast(a: Shape, b: Shape, lengths: Lengths, span: Span) -> Shape | None:
    """The shape of an elementwise operation on a and b, or None when they do not align.

    Axes align from the last one (names must agree where both are named); when that
    fails and every axis of the smaller operand is named, they align by name. An axis of
    length 1 broadcasts. Lengths must be equal for all values of the dimensions (E2006
    otherwise). Two prefixes align with each other.
    """
    if a.is_scalar:
        return b
    if b.is_scalar:
        return a
    trailing = _by_position(a, b, lengths, span)
    if trailing is not None:
        return trailing
    if a.rank < b.rank:
        return _by_name(a, b, lengths, span)
    if b.rank < a.rank:
        return _by_name(b, a, lengths, span)
    # equal ranks: the left operand's order, whichever side is all named
    return _by_name(b, a, lengths, span) or _by_name(a, b, lengths, span)


def _merge_lengths(x: AxisT, y: AxisT, lengths: Lengths, span: Span) -> AxisT:
    name = x.name or y.name
    if _one(x.length):
        return AxisT(name, y.length)
    if not _one(y.length):
        _require_broadcast(lengths, x.length, y.length, span)
    return AxisT(name, x.length)


def _require_broadcast(lengths, a: Lin, b: Lin, span: Span) -> None:
    """Lengths of a broadcast: equal, the counterexample not a length 1 (it would read as
    broadcasting) when the checker decides them (`Lengths`, or the rules' context over it)."""
    inner = lengths if isinstance(lengths, Lengths) else getattr(lengths, "lengths", None)
    if isinstance(inner, Lengths) and span is not None:
        inner.require_equal(a, b, span, broadcast=True)
    else:
        lengths.require_equal(a, b, span)


def _by_name(small: Shape, large: Shape, lengths: Lengths, span: Span) -> Shape | None:
    named = small.axes and all(x.name for x in small.axes)
    if not named or (small.prefix and not large.prefix):
        return None
    places = [large.axis(x.name) for x in small.axes]
    if None in places:
        return None
    axes = list(large.axes)
    for x, i in zip(small.axes, places, strict=True):
        axes[i] = _merge_lengths(large.axes[i], x, lengths, span)
    return Shape(large.prefix or small.prefix, tuple(axes))


def _by_position(a: Shape, b: Shape, lengths: Lengths, span: Span) -> Shape | None:
    n = min(a.rank, b.rank)
    longer = a if a.rank >= b.rank else b
    shorter = b if longer is a else a
    if shorter.prefix and not longer.prefix and longer.rank > shorter.rank:
        return None  # the prefix of the shorter could be any of the longer's leading axes
    pairs = list(zip(a.axes[a.rank - n :], b.axes[b.rank - n :], strict=True))
    if any(x.name and y.name and x.name != y.name for x, y in pairs):
        return None
    axes = list(longer.axes[: longer.rank - n])
    axes.extend(_merge_lengths(x, y, lengths, span) for x, y in pairs)
    return Shape(a.prefix or b.prefix, tuple(axes))


def contract(a: Shape, b: Shape, lengths: Lengths, span: Span) -> Shape:
    """`a · b`: the last axis of a against the first of b."""
    if not a.axes or not b.axes or b.prefix:
        raise err(
            "E2003",
            f"cannot contract `{a}` with `{b}`",
            Label(span, "`·` needs an axis on each side, and no prefix on the right"),
            note="`·` contracts the last axis of the left operand with the first of the right",
        )
    x, y = a.axes[-1], b.axes[0]
    if x.name and y.name and x.name != y.name:
        raise err(
            "E2003",
            f"cannot contract the axis `{x.name}` of `ℝ{a}` with the axis `{y.name}` of `ℝ{b}`",
            Label(span, f"`{x.name}` against `{y.name}`"),
            note="`·` contracts axes of one name, or positional ones; `ein` renames and sums",
        )
    lengths.require_equal(x.length, y.length, span)
    return Shape(a.prefix, a.axes[:-1] + b.axes[1:])


def relabeled(out: tuple[str, ...], left: Shape, right: Shape) -> Shape:
    """The right operand of `ein[out](left * right)` with its axis `n` renamed `n2` where
    `n2` is an axis of the left operand or of the output and not of the right one."""
    wanted = (set(left.names()) | set(out)) - set(right.names())
    if not any(n.endswith("2") for n in wanted):
        return right  # nothing to rename (in linear time: `ein[` may be long)
    axes = []
    for x in right.axes:
        relabel = f"{x.name}2"
        axes.append(AxisT(relabel, x.length) if relabel in wanted else x)
    return Shape(right.prefix, tuple(axes))


def ein(
    out: tuple[str, ...], left: Shape, right: Shape | None, lengths: Lengths, span: Span
) -> Shape:
    """`ein[out](l * r)`: axes named in `out` are kept, the others summed.

    The right operand's axis `n` is relabeled `n2` when `n2` is an axis of the left operand
    or of the output and not of the right one (`seq` to `seq2`): attention's keys axis.
    """
    seen: set[str] = set()
    twice = [n for n in out if n in seen or seen.add(n)]  # linear: `ein[` may be long
    if twice:
        raise err(
            "E2013",
            f"the axis `{twice[0]}` appears twice in the output of `ein`",
            Label(span, "the output's axes are distinct names"),
        )
    operands = [left] if right is None else [left, right]
    for s in operands:
        if any(not x.name for x in s.axes):
            raise err(
                "E2007",
                f"`ein` needs named axes, and `{s}` has a positional one",
                Label(span, "name every axis of the operands"),
            )
    if right is not None:
        right = relabeled(out, left, right)
        operands = [left, right]
    found: dict[str, AxisT] = {}  # each name's first axis: the result reuses it
    for s in operands:
        for x in s.axes:
            if x.name in found:
                lengths.require_equal(found[x.name].length, x.length, span)
            else:
                found[x.name] = x
    missing = [n for n in out if n not in found]
    if missing:
        raise err(
            "E2007",
            f"`ein` output axis `{missing[0]}` is in neither operand",
            Label(span, f"the operands have {', '.join(found) or 'no named axes'}"),
        )
    prefix = any(s.prefix for s in operands)
    return Shape(prefix, tuple(found[n] for n in out))


def alignment(operand: Shape, result: Shape) -> tuple[int, ...]:
    """Where each axis of an operand of a broadcast goes in the result, counted from the
    result's last axis (-1 the last): by trailing position when the names allow it, else
    by name, as `broadcast` aligned them. The operand's prefix goes to the result's."""
    k = operand.rank
    trailing = result.axes[result.rank - k :] if k <= result.rank else None
    if trailing is not None and all(
        not (x.name and y.name and x.name != y.name)
        for x, y in zip(operand.axes, trailing, strict=True)
    ):
        return tuple(range(-k, 0))
    return tuple(result.axis(x.name) - result.rank for x in operand.axes)

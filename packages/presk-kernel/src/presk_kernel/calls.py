"""Call boundaries: the host functions of a schedule, and the calls the lowering keeps.

The lowering walks an entry's calls as a host would; each call it makes is recorded as a
`Call` (the callee, the caller's buffers it passes and receives, the launches and calls of
its body) or inlined into its caller, with the reason (`Inlined`). A call is kept when it
is one the host can make: the callee launches a kernel, and each of its results is a whole
buffer written in its body (a result that is a view of an argument, or a number known when
lowering, has no buffer of its own to write). A function is one host function: calls of it
that launch other kernels (a hyperparameter's value baked in) are inlined, every one.

Fusion works on the flattened launches (`flat_launches`); a fused kernel whose producer and
consumer lie in different calls inlines the calls between them (`fused_body`), so fusion
never crosses a kept boundary and the launch counts are fusion's as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from presk_kernel.ir import (
    Arg,
    Axis,
    Buffer,
    Call,
    HostFunction,
    Inlined,
    Launch,
    Schedule,
    elements,
)

NO_KERNEL = "launches no kernel"
VIEW = "a result is a view of an argument"
PART = "a result is part of a buffer"
TWICE = "a result is returned twice"
KNOWN = "a result is a number known when lowering"
DIFFERENT = "its calls launch different kernels (an argument's value is in them)"
FUSED = "fused with a launch across the call"


def entry_call(schedule: Schedule) -> Call:
    """The entry's call: `schedule.body`, or for a schedule built without host functions the
    entry's function alone, every launch in it."""
    if schedule.body is not None:
        return schedule.body
    args = tuple(Arg(b) for b in schedule.inputs)
    results = tuple(Arg(b) for b in schedule.outputs)
    return Call(schedule.entry, args, results, tuple(range(len(schedule.launches))))


def host_functions(schedule: Schedule) -> tuple[HostFunction, ...]:
    """The schedule's host functions (for one built without them, the entry's alone)."""
    if schedule.body is not None:
        return schedule.functions
    call = entry_call(schedule)
    return (signature(call, schedule),)


def signature(call: Call, schedule: Schedule, calls: int = 1) -> HostFunction:
    """The host function a call runs: its parameters' and results' types, from its buffers."""

    def buffers(args: tuple[Arg, ...], start: int) -> tuple[Buffer, ...]:
        hb = schedule.buffers
        return tuple(Buffer(start + i, hb[a.buf].dtype, hb[a.buf].axes) for i, a in enumerate(args))

    params = buffers(call.args, 0)
    return HostFunction(call.function, params, buffers(call.results, len(params)), calls)


def call_launches(call: Call) -> Iterator[int]:
    """The launches a call runs, its calls' included, in order."""
    for item in call.body:
        if isinstance(item, Call):
            yield from call_launches(item)
        else:
            yield item


def calls_in(call: Call) -> Iterator[Call]:
    """Every call under `call` (not itself), depth first, in order."""
    for item in call.body:
        if isinstance(item, Call):
            yield item
            yield from calls_in(item)


def passed(call: Call | None) -> set[int]:
    """The host buffers passed to or from a host function (a `Call`) under `call`, itself
    included (none for a schedule without calls)."""
    if call is None:
        return set()
    out = {a.buf for a in call.args + call.results}
    for c in calls_in(call):
        out |= {a.buf for a in c.args + c.results}
    return out


def flat_launches(schedule: Schedule) -> tuple[Launch, ...]:
    """The launches in the order the host runs them: the entry's call flattened."""
    return tuple(schedule.launches[i] for i in call_launches(entry_call(schedule)))


def inline(call: Call, chosen: Callable[[Call], str | None]) -> Call:
    """`call` with every call under it that `chosen` gives a reason for spliced into its
    caller's body (its own inlined calls with it), the reason recorded there."""
    body: list[int | Call] = []
    inlined = list(call.inlined)
    for item in call.body:
        if not isinstance(item, Call):
            body.append(item)
            continue
        why = chosen(item)  # of the call as given (its inner calls not yet inlined)
        item = inline(item, chosen)
        if why is None:
            body.append(item)
        else:
            body.extend(item.body)
            inlined += [Inlined(item.function, why), *item.inlined]
    return replace(call, body=tuple(body), inlined=tuple(inlined))


def with_calls(schedule: Schedule, body: Call) -> Schedule:
    """`schedule` with `body` as its entry's call, each function's count of calls from it."""
    counts: dict[str, int] = {}
    for c in calls_in(body):
        counts[c.function] = counts.get(c.function, 0) + 1
    functions = tuple(
        replace(f, calls=1 if i == 0 else counts.get(f.name, 0))
        for i, f in enumerate(schedule.functions)
    )
    return replace(schedule, functions=functions, body=body)


def launch_paths(call: Call) -> dict[int, tuple[int, ...]]:
    """Each launch under `call`: the calls that hold it, outermost first (their `id`s,
    `call`'s own first)."""
    paths: dict[int, tuple[int, ...]] = {}

    def walk(c: Call, path: tuple[int, ...]) -> None:
        for item in c.body:
            if isinstance(item, Call):
                walk(item, (*path, id(item)))
            else:
                paths[item] = path

    walk(call, (id(call),))
    return paths


def fused_body(body: Call, merges: list[tuple[int, int]], kept: list[int]) -> Call:
    """The entry's call after fusion: launch `i` fused into launch `j` for each of `merges`
    (positions before fusion) inlines every call holding one of them and not the other,
    then the launches are renumbered to `kept`'s order (the positions fusion kept)."""
    paths = {i: p[1:] for i, p in launch_paths(body).items()}  # below the entry's call
    crossed: set[int] = set()
    for i, j in merges:
        a, b = paths.get(i, ()), paths.get(j, ())
        common = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        common = min(len(a), len(b)) if common is None else common
        crossed.update(a[common:] + b[common:])
    spliced = inline(body, lambda c: FUSED if id(c) in crossed else None)
    position = {old: new for new, old in enumerate(kept)}
    return _renumber(spliced, position)


def _renumber(call: Call, position: dict[int, int]) -> Call:
    body: list[int | Call] = []
    for item in call.body:
        if isinstance(item, Call):
            body.append(_renumber(item, position))
        elif item in position:
            body.append(position[item])
    return replace(call, body=tuple(body))


def _unnamed(node):
    """A kernel or a host function with its buffers' axes unnamed: two calls that pass
    tensors of the same shapes under other axis names run the same code."""

    def bare(bufs: tuple[Buffer, ...]) -> tuple[Buffer, ...]:
        return tuple(replace(b, axes=tuple(Axis(None, a.length) for a in b.axes)) for b in bufs)

    if isinstance(node, HostFunction):
        return replace(node, params=bare(node.params), results=bare(node.results))
    return replace(node, inputs=bare(node.inputs), outputs=bare(node.outputs))


# ---- recording the calls while lowering ---------------------------------------------------


@dataclass
class Frame:
    """A call being lowered: where its launches and buffers start, its calls so far."""

    function: str
    args: tuple[Arg, ...]
    launches: int
    buffers: int
    children: list[tuple[int, int, Call | None, list, list]] = field(default_factory=list)


@dataclass
class Recorder:
    """The calls of a lowering, as it walks them (`enter` before a call, `leave` after)."""

    frames: list[Frame] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the functions, in the order reached
    first: dict[str, Call] = field(default_factory=dict)  # each one's first call

    types: dict[int, HostFunction] = field(default_factory=dict)  # each call's, by its id

    def enter(self, function: str, args: list, launches: int, buffers: int) -> None:
        """Open a call of `function` on `args`, its tensor leaves (buf, offset, dtype, axes)."""
        if function not in self.order:
            self.order.append(function)
        self.frames.append(Frame(function, tuple(args), launches, buffers))

    def leave(self, launches: int, results: list, known: bool, sizes: list[int]) -> Call:
        """Close the innermost call: `results`, its result leaves as (buf, offset, dtype, axes)
        (`known`: a leaf is a number), `sizes` the host buffers' sizes. The call is kept,
        or handed to its caller inlined with the reason."""
        f = self.frames.pop()
        body: list[int | Call] = []
        inlined: list[Inlined] = []
        pos = f.launches
        for start, end, call, items, notes in f.children:
            body.extend(range(pos, start))
            if call is not None:
                body.append(call)
            else:
                body.extend(items)
                inlined.extend(notes)
            pos = end
        body.extend(range(pos, launches))
        args = tuple(Arg(b, o) for b, o, _, _ in f.args)
        result_args = tuple(Arg(b, o) for b, o, _, _ in results)
        call = Call(f.function, args, result_args, tuple(body), tuple(inlined))
        params = tuple(Buffer(i, d, a) for i, (_, _, d, a) in enumerate(f.args))
        outs = tuple(Buffer(len(params) + i, d, a) for i, (_, _, d, a) in enumerate(results))
        self.types[id(call)] = HostFunction(f.function, params, outs)
        self.first.setdefault(f.function, call)
        why = None if not self.frames else _why(f, launches, results, known, sizes)
        if self.frames:
            notes = [] if why is None else [Inlined(f.function, why), *inlined]
            kept = call if why is None else None
            self.frames[-1].children.append((f.launches, launches, kept, body, notes))
        return call


def _why(f: Frame, launches: int, results: list, known: bool, sizes: list[int]) -> str | None:
    if launches == f.launches:
        return NO_KERNEL
    if known:
        return KNOWN
    if any(b < f.buffers for b, _, _, _ in results):
        return VIEW
    if any(o != 0 or elements(a) != sizes[b] for b, o, _, a in results):
        return PART
    if len({b for b, _, _, _ in results}) != len(results):
        return TWICE
    return None


def host_schedule(schedule: Schedule, body: Call, recorder: Recorder) -> Schedule:
    """`schedule` with its host functions, one per function the lowering reached (the
    entry's first, then in the order reached; a function every call of which was inlined
    is listed with no call), from the recorded entry's call; the calls of a function that
    launch other kernels than its first, or take other buffers' types, are inlined."""

    bare: dict[int, object] = {}  # each launch's kernel unnamed once (not once per call)

    def kernels(c: Call) -> tuple:  # compared by their buffers' shapes, not axis names
        for i in call_launches(c):
            if i not in bare:
                bare[i] = _unnamed(schedule.launches[i].kernel)
        return tuple(bare[i] for i in call_launches(c))

    def shape(c: Call) -> tuple:
        return _unnamed(recorder.types[id(c)]), kernels(c)

    reference: dict[str, tuple] = {}
    bad = set()
    for c in calls_in(body):
        if c.function not in bad and reference.setdefault(c.function, here := shape(c)) != here:
            bad.add(c.function)
    body = inline(body, lambda c: DIFFERENT if c.function in bad else None)
    functions = [recorder.types[id(recorder.first[body.function])]] + [
        replace(recorder.types[id(recorder.first[name])], calls=0)
        for name in recorder.order
        if name != body.function
    ]
    return with_calls(replace(schedule, functions=tuple(functions)), body)


__all__ = [
    "Recorder",
    "call_launches",
    "calls_in",
    "entry_call",
    "flat_launches",
    "fused_body",
    "host_functions",
    "host_schedule",
    "inline",
    "launch_paths",
    "signature",
    "with_calls",
]

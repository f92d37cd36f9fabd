"""The network diagram of an entry (`presk explain`'s network.svg, `presk dump --stage network`): its calls as boxes and
arrows, from the schedule the entry lowers to (presk_kernel.calls).

Each box is one call of a Presk function in the order the host makes them: the function, the
kernels its own body launches, and the bytes of its temporaries (presk_cback.memory's
count); an arrow goes from a call to each call it makes. The calls are laid out as an
outline, a callee one step right of its caller and below the calls before it, so that the
diagram reads as the call tree top to bottom. Plain SVG, no script, no external resource.
"""

from __future__ import annotations

from html import escape

from presk_kernel.calls import entry_call
from presk_kernel.ir import Call, Schedule

from presk_cback.memory import nbytes

ROW, STEP, CHAR, PAD = 52, 28, 7.5, 10


def _rows(schedule: Schedule) -> list[tuple[int, Call, int]]:
    """(depth, call, parent row or -1), preorder."""
    out: list[tuple[int, Call, int]] = []

    def walk(call: Call, depth: int, parent: int) -> None:
        at = len(out)
        out.append((depth, call, parent))
        for item in call.body:
            if isinstance(item, Call):
                walk(item, depth + 1, at)

    walk(entry_call(schedule), 0, -1)
    return out


def temporaries(schedule: Schedule, call: Call) -> int:
    """The bytes of the temporaries `call`'s own body binds (its callees' arguments and
    results included, as a C function allocates them)."""
    outside = {a.buf for a in (*call.args, *call.results)}
    seen: set[int] = set()
    for item in call.body:
        args = (
            (*item.args, *item.results) if isinstance(item, Call) else schedule.launches[item].args
        )
        seen |= {a.buf for a in args if a.buf not in outside}
    persistent = {*schedule.inputs, *schedule.outputs}
    return sum(nbytes(schedule, b) for b in seen - persistent)


def network_svg(schedule: Schedule) -> str:
    """The SVG text of the schedule's call tree (the module's docstring)."""
    rows = _rows(schedule)
    boxes = []
    for i, (depth, call, parent) in enumerate(rows):
        launches = sum(1 for item in call.body if not isinstance(item, Call))
        detail = (
            f"{launches} kernel{'s' if launches != 1 else ''}, {temporaries(schedule, call):,} B"
        )
        label = call.function
        width = CHAR * max(len(label), len(detail)) + 2 * PAD
        boxes.append((PAD + STEP * depth, PAD + ROW * i, width, label, detail, parent))
    width = max(x + w for x, _, w, *_ in boxes) + PAD
    height = PAD + ROW * len(boxes)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
        f"<title>the calls of {escape(schedule.entry)}</title>",
    ]
    for i, (x, y, w, label, detail, parent) in enumerate(boxes):
        if parent >= 0:
            px, py = boxes[parent][0], boxes[parent][1]
            out.append(
                f'<path id="arrow{i}" d="M{px + PAD} {py + 36} V{y + 18} H{x}" fill="none"'
                ' stroke="#555" marker-end="url(#head)"/>'
            )
        out.append(
            f'<g id="call{i}"><rect x="{x}" y="{y}" width="{w}" height="36" rx="4"'
            ' fill="#eef3fb" stroke="#35577d"/>'
            f'<text x="{x + PAD}" y="{y + 15}">{escape(label)}</text>'
            f'<text x="{x + PAD}" y="{y + 29}" fill="#555">{escape(detail)}</text></g>'
        )
    out.insert(
        2,
        '<defs><marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4"'
        ' orient="auto"><path d="M0 0 L8 4 L0 8 z" fill="#555"/></marker></defs>',
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def outline(schedule: Schedule) -> str:
    """The diagram as text: a line per call, indented by depth (`dump --stage network`)."""
    lines = []
    for depth, call, _ in _rows(schedule):
        launches = sum(1 for item in call.body if not isinstance(item, Call))
        lines.append(
            f"{'  ' * depth}{call.function}  ({launches} kernel{'s' if launches != 1 else ''},"
            f" {temporaries(schedule, call):,} B of temporaries)"
        )
    return "\n".join(lines) + "\n"


__all__ = ["network_svg", "outline", "temporaries"]

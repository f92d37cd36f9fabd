"""`presk reprice DAY --profile P --out DAY2`: a recorded day's points priced again by
another profile's model from the counts the day recorded (under the model's rules), every
other field copied: nothing is measured, so the same day and profile give the same bytes.
"""

from __future__ import annotations

import json
import os

from presk_kernel.layout_day import read_day
from presk_kernel.layout_model import Machine, ModelError, Profile, counts_for


def reprice_day(day_path: str, profile: Profile, profile_path: str, out: str) -> str:
    """Write the repriced day to `out` (whole, or not at all) and return what to print."""
    from presk_core.data import atomic_dir

    model = profile.model
    if model is None:
        raise ModelError(
            "E7126",
            f"`{profile_path}` has samples but no model yet",
            "presk refit it, or calibrate it with presk bench --space calib",
        )
    day = read_day(day_path)
    recorded = day.doc["profile"].get("machine")
    kind = recorded if isinstance(recorded, str) else None  # the kind, as autotune records it
    if isinstance(recorded, dict):
        try:
            kind = Machine.from_dict(recorded).kind
        except ValueError:
            kind = None
    if kind is not None and kind != profile.machine.kind:
        raise ModelError(
            "E7122",
            f"`{profile_path}` profiles another machine ({profile.machine.kind}); the day "
            f"`{day_path}` was measured on {kind}",
            "price it by a profile of the machine it was measured on",
        )
    if os.path.exists(out) and os.path.samefile(out, day_path):
        raise ModelError("E7127", f"--out `{out}` is the day it prices again: give another folder")
    files: dict[str, str] = {}
    for nest in day.nests:
        lines = []
        for p in nest.points:
            try:
                c = counts_for(p.raw["counts"], model.rules)
            except ValueError as e:
                raise ModelError(
                    "E7129", f"point {p.index} of `{nest.name}` in `{day_path}`: {e}"
                ) from None
            raw = dict(p.raw)
            raw["predicted_us"] = model.predict(c) * 1e6
            lines.append(json.dumps(raw, ensure_ascii=False))
        files[nest.file] = "".join(line + "\n" for line in lines)
    doc = dict(day.doc)
    doc["profile"] = {"path": profile_path, "machine": profile.machine.to_dict(), "u": model.u}
    doc["repriced_from"] = day_path
    try:
        with atomic_dir(out) as tmp:
            for name, text in files.items():
                with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                    f.write(text)
            with open(os.path.join(tmp, "day.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    except OSError as e:
        raise ModelError("E7127", f"cannot write `{out}`: {e.strerror or e}") from None
    rows = [
        f"{n.name:<28} {len(n.points):>5} points priced again  {os.path.join(out, n.file)}"
        for n in day.nests
    ]
    total = sum(len(n.points) for n in day.nests)
    rows.append(
        f"-- {total} points of {len(day.nests)} nests priced again under {profile_path} "
        f"(u = {model.u:.3f}), their times copied from {day_path}: nothing measured"
    )
    rows.append(f"-- day written to {out}")
    return "\n".join(rows) + "\n"


__all__ = ["reprice_day"]

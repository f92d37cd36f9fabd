"""`make plan-check` (L851): a plan stating the default layout lowers every example entry to
the same kernels, byte for byte (the `kernel` document and the C of the entry), on one
thread and on two. One line per entry; exit 1 if any differs."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packages" / "presk-kernel" / "tests"))


def main() -> int:
    from kernel_entries import CASES, case
    from presk_cli.plans import plan_check

    bad = 0
    for file, entry, dims, consts in CASES:
        core, name, d, args, _ = case(file, entry, dims, False, consts)
        for realize in ("f64", "f32"):
            for threads in (1, 2):
                n, same = plan_check(core, name, d, realize, threads, args)
                bad += not same
                verdict = "the same kernels" if same else "DIFFERENT kernels"
                print(f"{file} {entry} {realize} threads {threads}: {n} launches, {verdict}")
    print(f"plan-check: {'every entry the same' if not bad else f'{bad} differing'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

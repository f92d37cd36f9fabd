"""Issue 23's "every command in docs/cli.md": each command of step 17 (plan, autotune,
rank, reprice, refit) has its section in docs/cli.md whose heading names every option it
takes, and the step's options of run, train and bench (--plan, --calibrate, --space and its
values, --combine, --rules) are named in theirs."""

from __future__ import annotations

import re

from helpers import ROOT

STEP_17 = ("plan", "autotune", "rank", "reprice", "refit")


def _headings() -> dict[str, str]:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    out = {}
    for line in text.splitlines():
        m = re.match(r"^## presk (\S+)", line)
        if m and m[1] not in out:
            out[m[1]] = line
    return out


def test_every_step_17_command_and_option_is_in_cli_md():
    from presk_cli.main import cli

    heads = _headings()
    for name in STEP_17:
        assert name in heads, f"docs/cli.md has no section `## presk {name}`"
        cmd = cli.get_command(None, name)
        for p in cmd.params:
            for opt in p.opts:
                if opt.startswith("--") and opt != "--help":
                    assert opt in heads[name], f"`presk {name} {opt}` is not in its heading"
    bench = heads["bench"]
    for opt in ("--calibrate", "--space", "--combine", "--rules", "--plan"):
        assert opt in bench, f"`presk bench {opt}` is not in its heading"
    space = next(p for p in cli.get_command(None, "bench").params if p.name == "space")
    assert "--space " + "|".join(space.type.choices) in bench
    for name in ("run", "train"):
        assert "--plan" in heads[name], f"`presk {name} --plan` is not in its heading"

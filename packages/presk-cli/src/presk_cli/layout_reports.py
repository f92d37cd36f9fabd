"""`presk rank`, `presk reprice` and `presk refit`: the layout cost model's reports on
recorded measurements, nothing measured (docs/plans.md). Each reads files and writes one,
whole (a temporary renamed), or writes nothing and prints a coded diagnostic (E7120–E7129).
"""

from __future__ import annotations

import sys

import click


def _fail(e) -> None:
    from presk_cli.native import NativeError, fail

    fail(NativeError(e.code, str(e), e.help))


@click.command(
    short_help="Rank accuracy of the layout cost model on two days of measurement, the"
    " statements of plan 0.7.0, and plan 0.8.0's Q"
)
@click.argument("day1", type=click.Path(file_okay=False))
@click.argument("day2", type=click.Path(file_okay=False))
@click.option("--entry", required=True, help="The entry the two days measured.")
@click.option(
    "--out", "out", required=True, metavar="REPORT.md", help="Where to write the report too."
)
def rank(day1, day2, entry, out) -> None:
    """The statements L–Q and the close pairs per decision class on two days of `presk
    autotune` (DAY1, DAY2 its --out folders): the report in Markdown on standard output and
    in REPORT.md, the same bytes from the same days on any machine."""
    from presk_kernel.layout_day import check_days, read_day
    from presk_kernel.layout_model import ModelError, write_text_file
    from presk_kernel.layout_rank import report

    try:
        one, two = read_day(day1), read_day(day2)
        check_days(one, two, entry)
        text = report(one, two, entry)
        write_text_file(out, text)
    except ModelError as e:
        _fail(e)
    click.echo(text, nl=False)
    sys.stdout.flush()


@click.command(
    short_help="Price the points of a recorded day again under another profile, their times"
    " copied: nothing is measured"
)
@click.argument("day", type=click.Path(file_okay=False))
@click.option(
    "--profile", required=True, metavar="P.json", help="The layout profile to price them by."
)
@click.option("--out", "out", required=True, metavar="DIR", help="The new day's folder.")
def reprice(day, profile, out) -> None:
    """Each point of DAY (a folder of `presk autotune`) priced by the model of --profile
    from the counts the day recorded, its times, bits and everything else copied: a day in
    --out that `presk rank` reads as any other."""
    from presk_kernel.layout_model import ModelError, load_profile
    from presk_kernel.layout_reprice import reprice_day

    try:
        p = load_profile(profile)
        lines = reprice_day(day, p, profile, out)
    except ModelError as e:
        _fail(e)
    click.echo(lines, nl=False)
    sys.stdout.flush()


@click.command(
    short_help="Fit a profile's layout cost model again on its samples, in another form:"
    " nothing is measured"
)
@click.argument("profile", type=click.Path(dir_okay=False))
@click.option(
    "--combine",
    default="pnorm",
    show_default=True,
    metavar="pnorm|sum|max",
    help="How the five terms combine: the p-norm (q fitted), their sum, their maximum.",
)
@click.option(
    "--rules",
    default="lines,overhead",
    show_default=True,
    metavar="RULES",
    help="How the counts are read: a comma-separated subset of lines, overhead, or none.",
)
@click.option("--out", "out", required=True, metavar="P2.json", help="The new profile.")
def refit(profile, combine, rules, out) -> None:
    """The model of PROFILE fitted again on its samples under --combine and --rules: the
    fit's lines as `presk bench --calibrate --space calib` prints them, and the profile
    with its samples and the new model written to --out."""
    from presk_kernel.layout_fit import fit_line, refit_profile
    from presk_kernel.layout_model import (
        ModelError,
        load_profile,
        parse_combine,
        parse_rules,
        rules_text,
        save_profile,
    )

    try:
        form, how = parse_combine(combine), parse_rules(rules)
        p = load_profile(profile)
        new = refit_profile(p, form, how)
        save_profile(new, out)
    except ModelError as e:
        _fail(e)
    assert new.model is not None
    click.echo(
        f"-- refit of {profile}: {len(new.samples)} samples, combine {form}, rules "
        f"{rules_text(how)}; nothing measured\n{fit_line(new.model)}\n-- profile written to {out}"
    )
    sys.stdout.flush()


__all__ = ["rank", "refit", "reprice"]

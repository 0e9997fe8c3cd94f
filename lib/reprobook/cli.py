"""The ``reprobook`` command line: list, new, sync, run, ledger, archive, book."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_new(args: argparse.Namespace) -> int:
    from .core.paths import book_root
    from .scaffold import ScaffoldError, new_chapter, remove_chapter

    root = book_root()
    try:
        if args.remove:
            remove_chapter(args.number, args.slug, args.title, args.arxiv, root, args.part)
            print(f"removed the scaffold of chapter {args.number}_{args.slug}")
            return 0
        paths = new_chapter(args.number, args.slug, args.title, args.arxiv, root, args.part)
    except ScaffoldError as err:
        print(f"reprobook new: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"  {path.relative_to(root)}")
    print(
        f"Chapter {args.number}_{args.slug} is in place and passes `make test` as it stands. "
        f"Next: replace the examples (CONTRIBUTING.md, 'Adding a chapter'), then "
        f"`reprobook run {args.number} --force`."
    )
    return 0


def _cmd_sync(args: argparse.Namespace) -> int:
    from . import registry
    from .core.paths import book_root

    root = book_root()
    try:
        changed = registry.sync(root)
    except registry.RegistryError as err:
        print(f"reprobook sync: {err}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"  wrote {path.relative_to(root)}")
    if not changed:
        print("_toc.yml and the README's chapter table are in step with the chapters")
    return 0


def _cmd_times(args: argparse.Namespace) -> int:
    from . import bench
    from .core.paths import book_root

    try:
        data, rows = bench.read_times(book_root(), args.profile, _tag(args.tag or ""))
    except (FileNotFoundError, ValueError) as err:
        print(f"reprobook times: {err}", file=sys.stderr)
        return 2
    text, over = bench.report(data, rows, slowest=args.slowest)
    print(text)
    return 1 if over and args.strict else 0


def _cmd_list(args: argparse.Namespace) -> int:
    from .core.chapters import find_chapters
    from .core.paths import book_root
    from .core.resources import chapter_resources, input_present

    root = book_root()
    total_gpu_h = total_h = 0.0
    for ch in find_chapters(root):
        try:
            res = chapter_resources(root, ch.slug, args.profile)
        except (ValueError, SyntaxError) as err:
            print(f"reprobook list: {err}", file=sys.stderr)
            return 2
        total_gpu_h += res.gpu_hours
        total_h += res.hours
        print(f"{ch.number} {ch.slug}: {ch.title} ({len(ch.claims)} claims)")
        print(f"    needs at the {args.profile} profile: {res.describe()}")
        for item in res.inputs:
            if args.profile == "smoke":
                built = input_present(item, "smoke", root, ch.slug)
                here = "fixture built" if built else "fixture built on the first smoke run"
                if item.find.startswith("module:"):
                    here = "present" if built else "missing here"
                print(f"    input: {item.describe()} as a smoke fixture, {here}")
                continue
            here = "present" if input_present(item) else "missing here"
            print(f"    input: {item.describe()}, {here}; get: {item.get}")
        for nb in ch.notebooks:
            ids = [c.id for c in ch.claims if c.notebook == nb.stem]
            print(f"    {nb.name}" + (f"  [{', '.join(ids)}]" if ids else ""))
    print(
        f"the book at the {args.profile} profile: {total_h:g} hours of jobs, "
        f"{total_gpu_h:g} GPU-hours"
    )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from . import runner, slurm
    from .core.paths import book_root

    try:
        # the values as typed: the runner converts each to the type its notebooks declare, and
        # refuses a wrong one (and a --jobs or --timeout out of range) before anything runs
        overrides = dict(runner.split_override(p) for p in args.param)
        tag = None if args.tag is None else _tag(args.tag)
        if args.collect:
            root = book_root()
            chapters = runner.select_chapters(root, args.chapters or None)
            overrides = runner.check_overrides(root, chapters, overrides)
            summary = runner.collect_slurm(
                root, profile=args.profile, tag=tag or runner.default_tag(overrides), wait=False
            )
        else:
            options = None
            if args.executor == "slurm":
                options = slurm.load_options(
                    book_root(),
                    args.slurm_config,
                    partition=args.partition,
                    account=args.account,
                    qos=args.qos,
                )
            summary = runner.run(
                args.chapters or None,
                profile=args.profile,
                overrides=overrides,
                jobs=args.jobs,
                force=args.force,
                timeout=args.timeout,
                progress=not args.no_progress,
                tag=tag,
                executor=args.executor,
                slurm_options=options,
                wait=not args.no_wait,
                dry_run=args.dry_run,
                warm_kernels=args.warm_kernels,
            )
    except (runner.RunError, slurm.SlurmError, ValueError) as err:
        print(f"reprobook run: {err}", file=sys.stderr)
        return 2
    except ImportError as err:  # submitit or papermill missing from a bare install
        print(
            f"reprobook run: {err.name or err} is not installed; install the book's locked "
            "environment (make env, or pip install -r requirements.lock)",
            file=sys.stderr,
        )
        return 2
    except SyntaxError as err:  # a notebook's parameters cell that is not Python
        print(
            f"reprobook run: a parameters cell does not parse ({err.filename or 'a notebook'}, "
            f"line {err.lineno}): {err.msg}",
            file=sys.stderr,
        )
        return 2
    if args.dry_run:
        return 0
    print(runner.format_summary(summary))
    if not summary.ok:
        print(
            f"{len(summary.failed)} notebook(s) failed, "
            f"{len(summary.failures)} job(s) did not finish",
            file=sys.stderr,
        )
        return 1
    return 0


def _tag(name: str) -> str:
    """A run's tag as typed: 'default' (or '') is the untagged run."""
    return "" if name in ("", "default") else name


def _results_of(tag: str):
    from . import runner
    from .core.paths import book_root, build_dir

    root = book_root()
    folder = runner.tag_results_dir(root, runner.check_tag(_tag(tag)))
    if _tag(tag) and not folder.exists():
        tagged = build_dir(root) / "tagged"
        known = sorted(p.name for p in tagged.iterdir()) if tagged.exists() else []
        raise runner.RunError(
            f"no run tagged {tag!r} (looked in {folder}); tags run so far: "
            f"{', '.join(['default', *known])}"
        )
    return folder


def _cmd_ledger(args: argparse.Namespace) -> int:
    from . import ledger, runner

    try:
        if args.compare:
            a, b = args.compare
            pairs = ledger.compare(
                ledger.collect(args.profile, results=_results_of(a)),
                ledger.collect(args.profile, results=_results_of(b)),
            )
            if args.format == "json":
                import json

                print(json.dumps(pairs, indent=2))
            else:
                print(ledger.render_compare(pairs, _tag(a) or "default", _tag(b) or "default"))
            return 1 if any(p["flip"] for p in pairs) else 0
        rows = ledger.collect(args.profile, results=_results_of(args.tag))
        if args.profile != "full":
            rows = ledger.attach_archived(rows)
    except runner.RunError as err:
        print(f"reprobook ledger: {err}", file=sys.stderr)
        return 2
    fmt = "table" if args.wide and args.format == "compact" else args.format
    import shutil

    print(ledger.render(rows, fmt, width=shutil.get_terminal_size((120, 40)).columns))
    return 0


def _cmd_archive(args: argparse.Namespace) -> int:
    from . import archive, runner
    from .core.paths import book_root

    root = book_root()
    try:
        tag = None if args.tag is None else _tag(args.tag)
        chapters = runner.select_chapters(root, args.chapters)
        results = runner.tag_results_dir(root, tag or "")
        state = runner.load_state(root, args.profile, tag or "")
        for ch in chapters:
            path = archive.archive_chapter(root, ch, args.profile, results, state)
            print(f"archived chapter {ch.number} {ch.slug} at the {args.profile} profile: "
                  f"{path.relative_to(root)}")  # fmt: skip
    except (runner.RunError, archive.ArchiveError) as err:
        print(f"reprobook archive: {err}", file=sys.stderr)
        return 2
    return 0


def _cmd_book(args: argparse.Namespace) -> int:
    from . import site

    try:
        index = site.build(
            profile=args.profile, source_only=args.source_only, allow_stale=args.allow_stale
        )
    except site.BuildError as err:
        print(f"reprobook book: {err}", file=sys.stderr)
        return 1
    print(f"the book is built: open {index}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reprobook", description="Run the reproducibility book's chapters and build it."
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser(
        "list", help="chapters, their notebooks, claims and the resources a run needs"
    )
    s.add_argument("--profile", default="reduced", choices=["reduced", "full", "smoke"])
    s.set_defaults(func=_cmd_list)

    s = sub.add_parser(
        "new", help="write the scaffold of a new chapter (passes make test as it stands)"
    )
    s.add_argument("number", metavar="NN", help="two-digit chapter number")
    s.add_argument("slug", help="the paper package's name, e.g. spr_ldp")
    s.add_argument("title", help="the paper's title")
    s.add_argument("--arxiv", default="", help="the paper's arXiv id, e.g. 2606.07443")
    s.add_argument(
        "--part",
        default=None,
        help="the part of the book it joins, e.g. 'Generative models' (default: a part of its "
        "own after the book's parts)",
    )
    s.add_argument(
        "--remove",
        action="store_true",
        help="take out an unmodified scaffold written with the same arguments",
    )
    s.set_defaults(func=_cmd_new)

    s = sub.add_parser(
        "times", help="each notebook's wall time, import time and peak memory against the budgets"
    )
    s.add_argument("--profile", default="reduced", choices=["reduced", "full", "smoke"])
    s.add_argument("--tag", default="", help="the tagged run to report (make bench: bench)")
    s.add_argument("--slowest", type=int, default=10, help="how many of the slowest to name")
    s.add_argument(
        "--strict", action="store_true", help="exit with status 1 when a budget is exceeded"
    )
    s.set_defaults(func=_cmd_times)

    s = sub.add_parser(
        "sync", help="write _toc.yml and the README's chapter table from the chapters"
    )
    s.set_defaults(func=_cmd_sync)

    s = sub.add_parser("run", help="execute chapters with papermill (skipping unchanged notebooks)")
    s.add_argument(
        "chapters",
        nargs="*",
        metavar="CHAPTER",
        help="slug, folder or number (default: every chapter)",
    )
    s.add_argument(
        "--profile",
        default="reduced",
        choices=["reduced", "full", "smoke"],
        help="reduced (default): 2 CPU cores, about a minute a notebook; full: the paper's "
        "scale; smoke: the full profile's code path cut to seconds on CPU, on tiny offline "
        "fixtures of its inputs (never verdicts: run it before spending GPU hours)",
    )
    s.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a notebook parameter; refused before anything runs if no chosen "
        "notebook has it, or if VALUE does not fit the type its parameters cell declares "
        "(seed: int, n: int | None, ...)",
    )
    s.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=2,
        help="chapters executed at once, at least 1 (default 2); a chapter's notebooks run "
        "in order",
    )
    s.add_argument("--force", action="store_true", help="execute even unchanged notebooks")
    s.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds per notebook before it is stopped, more than 0 (default 3600)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--warm-kernels",
        action="store_true",
        help="fork each kernel from a process that has imported torch and Lightning once "
        "(Linux, local executor; reprobook.kernels): seconds faster per notebook, but no peak "
        "memory is recorded (make smoke uses it)",
    )
    s.add_argument(
        "--executor",
        default="local",
        choices=["local", "slurm"],
        help="local: this machine (default); slurm: one Slurm job per chapter through submitit",
    )
    s.add_argument(
        "--partition", help="Slurm partition (else the config file's, else the cluster's default)"
    )
    s.add_argument("--account", help="Slurm account")
    s.add_argument("--qos", help="Slurm quality of service")
    s.add_argument(
        "--slurm-config",
        type=Path,
        metavar="FILE",
        help="YAML with partition, account, qos, additional_parameters, setup (default: "
        "reprobook-slurm.yml at the book's root, when there is one)",
    )
    s.add_argument(
        "--no-wait",
        action="store_true",
        help="with --executor slurm: return once the jobs are submitted",
    )
    s.add_argument(
        "--collect", action="store_true", help="gather Slurm jobs submitted earlier with --no-wait"
    )
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="execute and submit nothing: with --executor slurm, print each chapter's batch "
        "script (no Slurm needed); else list the notebooks that would execute",
    )
    s.add_argument(
        "--tag",
        default=None,
        metavar="NAME",
        help="keep this run's outputs under _build/tagged/NAME "
        "(default: seedN when -p seed=N, N != 0; "
        "'default' forces the untagged folders)",
    )
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("ledger", help="every claim of every chapter from the last run")
    s.add_argument("--profile", default="reduced", choices=["reduced", "full"])
    s.add_argument(
        "--format",
        default="compact",
        choices=["compact", "table", "markdown", "json"],
        help="compact: one line per claim, cut to the terminal (default); "
        "table: every column in full",
    )
    s.add_argument(
        "--wide", action="store_true", help="the full text of every column (same as --format table)"
    )
    s.add_argument(
        "--tag",
        default="",
        metavar="NAME",
        help="the ledger of a tagged run (default: the untagged run)",
    )
    s.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="two runs' verdicts side by side, by tag ('default' for the untagged run); "
        "exits 1 when a verdict flipped",
    )
    s.set_defaults(func=_cmd_ledger)

    s = sub.add_parser(
        "archive",
        help="keep a finished run's results and manifest in archive/ (committed), for the book",
    )
    s.add_argument("chapters", nargs="+", metavar="CHAPTER", help="slug, folder or number")
    s.add_argument("--profile", choices=["reduced", "full"], default="full")
    s.add_argument("--tag", metavar="NAME", help="the results of a tagged run")
    s.set_defaults(func=_cmd_archive)

    s = sub.add_parser("book", help="build the HTML book from the last run's executed notebooks")
    s.add_argument("--profile", default="reduced", choices=["reduced", "full"])
    s.add_argument(
        "--source-only",
        action="store_true",
        help="render the notebooks as committed (no outputs): "
        "checks the book's structure without executing",
    )
    s.add_argument(
        "--allow-stale",
        action="store_true",
        help="build even when some results were produced under another claims.yml or notebook "
        "(they are marked STALE in red) instead of refusing",
    )
    s.set_defaults(func=_cmd_book)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `reprobook ledger | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `session-kernel` command: inspect, verify, repair and export stored session logs,
and serve them read-only to an ACP client.

    session-kernel inspect LOG [--session ID] [--json | --jsonl] [--turns] [--messages N]
                           [--tail] [--all] [--no-pager]
    session-kernel verify PATH... [--jobs N] [--exclude GLOB]... [--hidden] [--json]
                          [--scheduler ADDRESS | --dask local] [--report FILE [--minimize]]
                          [--strict] [--timeout SECONDS]
    session-kernel repair LOG [--session ID] [--dry-run] [--json]
    session-kernel export LOG --format acp|openai|anthropic [--session ID] [--view VIEW]
    session-kernel acp-serve STORE

Every command that reads logs takes `--max-decoded-bytes N` (a Zstandard log's
plaintext cap) and all but `acp-serve` take `--strict-shapes`.

LOG is a `.jsonl`, `.jsonl.zstd` or SQLite file, or a `JsonlStore` root with
`--session ID` (inspect, repair, export). Every decision comes from the
pure kernel; this package only reads files, commits repairs through the store
and prints. Whatever goes wrong ends in one line naming the log and the error
class, never a traceback (an unexpected exception is an internal error, exit
4); the exit statuses are listed in `kernel.cli.exits`.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Final

from kernel.cli import exits
from kernel.cli.output import error_line
from kernel.errors import KernelError, LimitExceeded, UnsupportedFormat

__all__ = ("main", "build_parser", "DEFAULT_VERIFY_TIMEOUT")

Command = Callable[[argparse.Namespace, int], int]

DEFAULT_VERIFY_TIMEOUT: Final = 120.0
"""Seconds `verify` lets one log take before reporting it `timeout` (`--timeout`)."""


def _version() -> str:
    try:
        return metadata.version("session-kernel")
    except metadata.PackageNotFoundError:
        return "unknown"


def _run_inspect(args: argparse.Namespace, now: int) -> int:
    from kernel.cli.inspecting import FULL, View, run_inspect

    if args.all:
        view = FULL
    else:
        view = View(
            turns=None if args.turns else View().turns,
            messages=args.messages,
            surface=False,
            tail=args.tail,
        )
    return run_inspect(
        args.log,
        session=args.session,
        as_json=args.json,
        now=now,
        normalize_legacy=not args.strict_shapes,
        max_decoded_bytes=args.max_decoded_bytes,
        view=view,
        as_jsonl=args.jsonl,
        no_pager=args.no_pager,
    )


def _run_verify(args: argparse.Namespace, now: int) -> int:
    from kernel.cli.verifying import run_verify

    return run_verify(
        args.paths,
        jobs=args.jobs,
        as_json=args.json,
        now=now,
        exclude=args.exclude,
        hidden=args.hidden,
        scheduler=args.scheduler,
        dask_local=args.dask == "local",
        report=args.report,
        minimize=args.minimize,
        strict=args.strict,
        timeout=args.timeout or None,
        normalize_legacy=not args.strict_shapes,
        max_decoded_bytes=args.max_decoded_bytes,
    )


def _run_repair(args: argparse.Namespace, now: int) -> int:
    from kernel.cli.repairing import run_repair, run_undo

    if args.undo:
        return run_undo(args.log, as_json=args.json, max_decoded_bytes=args.max_decoded_bytes)
    return run_repair(
        args.log,
        session=args.session,
        dry_run=args.dry_run,
        as_json=args.json,
        now=now,
        strict_tail=args.strict_tail,
        normalize_legacy=not args.strict_shapes,
        max_decoded_bytes=args.max_decoded_bytes,
    )


def _run_export(args: argparse.Namespace, now: int) -> int:
    from kernel.cli.exporting import run_export

    if args.view is not None and args.format != "acp":
        # A provider request body is always the model-visible history: no view to choose.
        error_line(f"export: --view applies to --format acp only, not {args.format}")
        return exits.USAGE
    return run_export(
        args.log,
        fmt=args.format,
        session=args.session,
        view=args.view or "transcript",
        now=now,
        normalize_legacy=not args.strict_shapes,
        max_decoded_bytes=args.max_decoded_bytes,
    )


def _run_acp_serve(args: argparse.Namespace, now: int) -> int:
    try:
        from kernel.cli.acp_serving import run_acp_serve
    except ImportError as exc:
        error_line(f"acp-serve needs the ACP SDK: pip install 'session-kernel[acp]' ({exc})")
        return exits.USAGE
    return run_acp_serve(args.store, version=_version(), max_decoded_bytes=args.max_decoded_bytes)


def _add_strict_shapes(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--strict-shapes",
        action="store_true",
        help="refuse older v0 shapes (no message ids, steering/message, older turn/end "
        "reasons) instead of reading them normalized (docs/format/persistence.md Appendix A)",
    )


def _decoded_bytes(value: str) -> int:
    try:
        limit = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {value!r}") from None
    if limit < 1:
        raise argparse.ArgumentTypeError("must be a positive number of bytes")
    return limit


def _add_max_decoded_bytes(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-decoded-bytes",
        type=_decoded_bytes,
        metavar="N",
        help="read a Zstandard log of up to N bytes of plaintext (default: 1000 times the "
        "file's size, at least 64 MiB and at most 256 MiB); a larger log is refused with "
        "LimitExceeded",
    )


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return jobs


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError("must be a number of seconds, 0 for no limit")
    return seconds


def _messages(value: str) -> int | None:
    if value == "all":
        return None
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or 'all': {value!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError("must be 0 or more, or 'all'")
    return count


_LOG_HELP: Final = ".jsonl, .jsonl.zstd or SQLite file, or a JsonlStore root with --session"


def _add_session(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument(
        "--session",
        metavar="ID",
        help=f"the session {what}: of a SQLite database, or the session in a JsonlStore "
        "root directory given as LOG",
    )


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=78)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `session-kernel` (each subcommand sets `run`)."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="session-kernel",
        description=_wrap(
            "Inspect, verify, repair and export agent session event logs "
            "(DeepSeek Harness session log format v0), and serve them read-only to an "
            "Agent Client Protocol client (acp-serve)."
        ),
        epilog=exits.EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"session-kernel {_version()}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    inspect = commands.add_parser(
        "inspect",
        help="show what the kernel derives from one log",
        description=_wrap(
            "Show a summary of a log: its header, event counts, the last turns, the "
            "surface and message counts, the request header in force, the repair plan "
            "and the torn tail; --turns, --messages, --tail and --all show more. --json "
            "and --jsonl print the whole report. Tables go through $PAGER (less) when "
            "standard output is a terminal. Writes nothing."
        ),
        epilog=exits.EPILOGS["inspect"],
        formatter_class=formatter,
    )
    inspect.add_argument("log", metavar="LOG", help=_LOG_HELP)
    _add_session(inspect, "to show (default: every session of a database)")
    output = inspect.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument(
        "--jsonl",
        action="store_true",
        help="print the report as JSON Lines: one record per line (a turn, a message, ...)",
    )
    inspect.add_argument("--turns", action="store_true", help="list every turn, not the last 5")
    inspect.add_argument(
        "--messages",
        type=_messages,
        default=0,
        metavar="N",
        help="list the last N derived messages ('all': every one; default 0)",
    )
    inspect.add_argument(
        "--tail",
        action="store_true",
        help="list the last 20 stored events and every complete record of a torn tail",
    )
    inspect.add_argument(
        "--all",
        action="store_true",
        help="every section in full: all turns and messages, surface seqs, replacements, tail",
    )
    inspect.add_argument(
        "--no-pager", action="store_true", help="never page the tables (also: PAGER=)"
    )
    _add_strict_shapes(inspect)
    _add_max_decoded_bytes(inspect)
    inspect.set_defaults(run=_run_inspect)

    verify = commands.add_parser(
        "verify",
        help="check admission, invariants, repairability and tool pairing of many logs",
        description=_wrap(
            "Verify every log under the given files and directories (directories "
            "are searched recursively for *.jsonl, *.jsonl.zstd and SQLite databases, "
            "passing over hidden files and directories): it must "
            "load, satisfy the relational invariants, repair cleanly, and give a message "
            "history in which every tool call is answered. A path that cannot be read is "
            "reported as unreadable, and the other logs are still verified."
        ),
        epilog=exits.EPILOGS["verify"],
        formatter_class=formatter,
    )
    verify.add_argument("paths", metavar="PATH", nargs="+", help="log files or directories")
    verify.add_argument(
        "--jobs", "-j", type=_jobs, default=1, metavar="N", help="worker processes (default 1)"
    )
    verify.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="pass over files and directories whose name or path matches GLOB (repeatable)",
    )
    verify.add_argument(
        "--hidden",
        action="store_true",
        help="also search hidden files and directories (names starting with a dot)",
    )
    verify.add_argument("--json", action="store_true", help="print one JSON report")
    cluster = verify.add_mutually_exclusive_group()
    cluster.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the checks on a Dask cluster (tcp://HOST:PORT; needs session-kernel[dask])",
    )
    cluster.add_argument(
        "--dask",
        choices=("local",),
        help="run the checks on a Dask LocalCluster of --jobs worker processes",
    )
    verify.add_argument(
        "--report",
        metavar="FILE",
        help="also write one row per log to FILE (*.parquet or *.csv; needs pyarrow)",
    )
    verify.add_argument(
        "--minimize",
        action="store_true",
        help="shrink each failing log to a minimal one, written beside --report",
    )
    verify.add_argument(
        "--strict",
        action="store_true",
        help="also fail (exit 1) a log with a finding: its last turn closed with a tool "
        "call unanswered (a history no provider accepts)",
    )
    verify.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_VERIFY_TIMEOUT,
        metavar="SECONDS",
        help="report a log whose check takes longer as timeout, naming its worker, and go "
        f"on (default {DEFAULT_VERIFY_TIMEOUT:g}; 0: no limit)",
    )
    _add_strict_shapes(verify)
    _add_max_decoded_bytes(verify)
    verify.set_defaults(run=_run_verify)

    repair = commands.add_parser(
        "repair",
        help="commit crash repair: truncate a torn tail, append closers",
        description=_wrap(
            "Commit the repair of one log through the store: truncate its torn "
            "tail and append the closers of an interrupted final turn, durably. Running it "
            "again finds nothing to do."
        ),
        epilog=exits.EPILOGS["repair"],
        formatter_class=formatter,
    )
    repair.add_argument("log", metavar="LOG", help=_LOG_HELP)
    _add_session(repair, "to repair (default: every session of a database)")
    repair.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    repair.add_argument(
        "--strict-tail",
        action="store_true",
        help="refuse (exit 1) a JSONL torn tail that holds complete records after damage",
    )
    repair.add_argument(
        "--undo",
        action="store_true",
        help="LOG is a quarantine file a repair kept: put its bytes back into the log",
    )
    repair.add_argument("--json", action="store_true", help="print one JSON document")
    _add_strict_shapes(repair)
    _add_max_decoded_bytes(repair)
    repair.set_defaults(run=_run_repair)

    export = commands.add_parser(
        "export",
        help="print one session as ACP notifications or a provider request body (JSON)",
        description=_wrap(
            "Print one stored session, balanced as a load would balance it (torn tail "
            "dropped, closers appended in memory), as the ACP session/update notifications "
            "that replay it, or as the OpenAI-compatible or Anthropic request body of its "
            "next model request. Writes nothing."
        ),
        epilog=exits.EPILOGS["export"],
        formatter_class=formatter,
    )
    export.add_argument("log", metavar="LOG", help=_LOG_HELP)
    export.add_argument(
        "--format", required=True, choices=("acp", "openai", "anthropic"), help="the projection"
    )
    _add_session(export, "to print (needed for a database of several sessions)")
    export.add_argument(
        "--view",
        choices=("transcript", "surface"),
        default=None,
        help="acp only: every message in log order (default), or the model-visible history only",
    )
    _add_strict_shapes(export)
    _add_max_decoded_bytes(export)
    export.set_defaults(run=_run_export)

    serve = commands.add_parser(
        "acp-serve",
        help="serve a store's sessions read-only to an ACP client over stdio",
        description=_wrap(
            "Run a read-only Agent Client Protocol agent on standard input and output: "
            "initialize, session/list and session/load (the stored session replayed as "
            "session/update notifications). Prompts and new sessions are refused with a "
            "protocol error. STORE is a JSONL store directory, a SQLite database or one "
            "JSONL log. Needs the acp extra."
        ),
        epilog=exits.EPILOGS["acp-serve"],
        formatter_class=formatter,
    )
    serve.add_argument("store", metavar="STORE", help="JSONL store directory, SQLite file or log")
    _add_max_decoded_bytes(serve)
    serve.set_defaults(run=_run_acp_serve)
    return parser


def _target(args: argparse.Namespace) -> str:
    log = getattr(args, "log", None)
    return f"{log}: " if log is not None else ""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see `kernel.cli.exits`)."""
    args = build_parser().parse_args(argv)
    now = int(time.time() * 1000)
    run: Command = args.run
    try:
        return run(args, now)
    except UnsupportedFormat as exc:
        error_line(f"{_target(args)}{type(exc).__name__}: {exc}")
        return exits.UNSUPPORTED
    except KernelError as exc:
        # The kernel names its argument; on the command line it is an option.
        hint = " (the command's --max-decoded-bytes N)" if isinstance(exc, LimitExceeded) else ""
        error_line(f"{_target(args)}{type(exc).__name__}: {exc}{hint}")
        return exits.INVALID
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            _silence_stdout()
            return exits.INVALID
        where = exc.filename if exc.filename is not None else _target(args).rstrip(": ")
        error_line(f"{where}: {exc.strerror or exc}")
        return exits.USAGE
    except KeyboardInterrupt:
        error_line("interrupted")
        return exits.INTERRUPTED
    except Exception as exc:  # a bug, not a verdict on the log: still one line
        error_line(f"{_target(args)}internal error: {type(exc).__name__}: {exc}")
        return exits.INTERNAL


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())

"""The human entry: ``radiance-mcp serve`` and one subcommand per tool.

Each tool subcommand is made from the tool's input model (``compute_ceiling`` becomes
``compute-ceiling``, ``log_text`` becomes ``--log-text``), prints a readable table, or the
tool's structured output with ``--json``, and exits 0 only on success: 1 on an error or a
refusal, 2 on a usage error (argparse's, an unknown flag, which is named with the closest one,
or arguments the tool's input model rejects), 3 when
a check ran and its verdict is a failure (``ok`` false), so a shell gate can call it directly.
A file named on the command line is read wherever it is: the log roots guard the MCP server
against agents, not a person against their own files.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from radiance_mcp import __version__
from radiance_mcp.app import http_settings
from radiance_mcp.app.arguments import field_help, parse_arguments, unknown_names, unwrap
from radiance_mcp.app.http_settings import HEAD_TIMEOUT_S, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_CLIENT, TOKEN_ENV
from radiance_mcp.app.tables import render, render_plan, said, width
from radiance_mcp.core.errors import InputError, RadianceMCPError
from radiance_mcp.sources.config import Fleet, load, split_allowed_host
from radiance_mcp.sources.offload import drive
from radiance_mcp.sources.runtime import Runtime
from radiance_mcp.tools import FAMILIES, ToolSpec, family, tool_names, tool_spec

if TYPE_CHECKING:  # serve's sockets load when it runs
    import socket

    from radiance_mcp.app.http_guard import HttpLimits


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser(_tools_for(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        return _unknown_flags(parser, args, extra)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args))
    except RadianceMCPError as exc:
        print(said(f"radiance-mcp: {exc}", sys.stderr), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_left()
    except (_Terminated, BaseExceptionGroup) as exc:
        if isinstance(exc, BaseExceptionGroup) and exc.subgroup(_Terminated) is None:
            if exc.split(BrokenPipeError)[1] is None:  # raised in the demo's task group
                return _reader_left()
            raise
        # Cleaned up; over stdio the SDK's reader thread still blocks on stdin, and a normal
        # exit would wait for it until the client closes the pipe.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signal.SIGTERM)


def _reader_left() -> int:
    """`radiance-mcp ... | head`: the reader of stdout left; say nothing more (exit as SIGPIPE would)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE


DESCRIPTION = """\
Read a radiance engine's own boot ledger to size its KV-cache / VRAM pair and to audit a
serving-shape change, as MCP tools for agents (radiance-mcp serve) or as commands here, one per
tool. New here? radiance-mcp demo walks the whole resize on a simulated fleet; add --demo to any
tool command to run it against that fleet."""
EPILOG = """\
exit status: 0 success; 1 an error or a refusal (the message says why and what to do); 2 a usage
error; 3 a check that ran and failed (ok false), so a shell gate can call a command directly."""
TEXT_FILE_SUFFIX = "_file"
"""--log-text-file PATH (or - for standard input) stands for --log-text TEXT: a long text cannot pass through argv."""


def _is_text(name: str) -> bool:
    return name == "text" or name.endswith(("_text", "_argv"))


def _tools_for(argv: Sequence[str]) -> list[ToolSpec]:
    """The tools to make subcommands of: for a tool's command, that tool alone, so the command
    imports only its own family's code; none for serve, demo, eval and doctor (the server imports them
    itself; the others call none); for anything else (help, a misspelling), all."""
    command = next((word for word in argv if not word.startswith("-")), "")
    if command in ("serve", "demo", "eval", "doctor"):
        return []
    name = command.replace("-", "_")
    if "_" not in command and name in tool_names():
        return [tool_spec(name)]
    return [spec for module in FAMILIES for spec in family(module)]


def _parser(tools: Sequence[ToolSpec]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="radiance-mcp", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"radiance-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_serve(commands)
    demo = commands.add_parser(
        "demo", help="walk the resize procedure through MCP on a simulated fleet",
        description="Start a simulated radiance fleet on this machine (ledgers, endpoints, a serve script; no GPU, "
        "no network), then walk the whole resize and step-shape audit through a real MCP client, printing each "
        "tool call and its result. Exits 0 only if every step comes out as the procedures say (about 10 s).",
    )
    demo.add_argument("--gates-dir", type=Path, default=None, metavar="DIR",
                      help="keep the env file and bats gates it renders in DIR (else they go with its directory)")
    demo.set_defaults(handler=_demo)
    _add_eval(commands)
    doctor = commands.add_parser(
        "doctor", help="check the fleet file: log roots, files, hosts, ledgers, endpoints", allow_abbrev=False,
        description="Check what a tool call would otherwise fail on, one call at a time: the log roots and the "
        "files the config names, each host's SSH login and host key, each service's ledger (readable, its "
        "engine, its newest boot settled) and endpoint (its answer to GET /v1/models, its dialect). One row per "
        "check; exit 0 only when every check holds, 3 when one fails.",
    )
    _add_config(doctor)
    doctor.add_argument("--demo", action="store_true", help="check a simulated fleet started for this command")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.set_defaults(handler=_doctor)

    for spec in tools:
        # No abbreviations: a misspelled flag is refused with the closest one, as over MCP.
        sub = commands.add_parser(
            spec.name.replace("_", "-"), help=spec.title, description=_first_paragraph(spec), allow_abbrev=False
        )
        _add_config(sub)
        sub.add_argument("--demo", action="store_true",
                         help="run against a simulated fleet started for this command (its services, e.g. "
                         "--service frank-archon; list them with list-fleet --demo)")
        sub.add_argument("--json", action="store_true", help="print the structured output as JSON")
        if spec.picture is not None:
            sub.add_argument("--svg", metavar="FILE", type=Path, help="also write the picture (SVG) to FILE")
        for name, info in spec.input_model.model_fields.items():
            # A required text may come from its file flag instead: the input model, not argparse, requires it.
            _add_field(sub, name, info.annotation, field_help(name, info), info.is_required() and not _is_text(name))
            if _is_text(name):
                sub.add_argument(_flag(name + TEXT_FILE_SUFFIX), dest=name + TEXT_FILE_SUFFIX, default=None,
                                 metavar="PATH", help=f"read {_flag(name)} from a file, or - for standard input")
        # _tool, not spec: a default of the subparser would shadow a field of that name (render-gates --spec).
        sub.set_defaults(handler=lambda a, spec=spec: _run_tool(spec, a), _tool=spec)
    return parser


def _add_serve(commands: Any) -> None:
    """radiance-mcp serve and its transports' options."""
    serve = commands.add_parser("serve", help="run the MCP server (stdio by default)", description="Run the MCP "
                                "server for an MCP client: over stdio by default (stdout carries only the protocol, "
                                "logs go to stderr), or streamable HTTP at /mcp with --http.")
    _add_config(serve)
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="HTTP port, 1 to 65535 (default 8000)")
    serve.add_argument(
        "--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
        help="a name HTTP clients reach the server by (its Host header), beyond the bind address; repeatable, "
        "added to [server] allowed_hosts of the config"
    )
    serve.add_argument(
        "--token", default=None, help=f"bearer token HTTP clients must send; required to bind anything but "
        f"loopback. Any user of this machine can read it in ps: prefer --token-file or {TOKEN_ENV}"
    )
    serve.add_argument("--token-file", type=Path, default=None, metavar="PATH",
                       help=f"read the bearer token from PATH (one line; chmod 600); it, or --token, wins over "
                       f"{TOKEN_ENV}")
    serve.add_argument("--head-timeout", type=_seconds, default=HEAD_TIMEOUT_S, metavar="SECONDS",
                       help=f"close an HTTP connection whose request head has not arrived within SECONDS, with 408 "
                       f"(default {HEAD_TIMEOUT_S:g})")
    serve.add_argument("--max-connections", type=_positive_int, default=MAX_CONNECTIONS, metavar="N",
                       help=f"HTTP connections held at once; past N, 503 and close (default {MAX_CONNECTIONS})")
    serve.add_argument("--max-connections-per-client", type=_positive_int, default=MAX_CONNECTIONS_PER_CLIENT,
                       metavar="N", help="HTTP connections one client address may hold at once; past N, 503 and close "
                       f"(default {MAX_CONNECTIONS_PER_CLIENT}; behind a reverse proxy every client has its address: "
                       "raise it there)")
    serve.add_argument("--demo", action="store_true", help="serve a simulated radiance fleet (no GPU, no network)")
    serve.add_argument("--record", metavar="FILE", type=Path, default=None,
                       help="append one JSON line per tool call, prompt and resource read to FILE (a regular file), "
                       "for evals, bound to RADIANCE_MCP_RECORD_NONCE if set (format: evals/README.md)")
    serve.set_defaults(handler=_serve)


def _add_eval(commands: Any) -> None:
    """radiance-mcp eval: its handler imports the evals (and, to run agents, the simulator) when it runs."""
    ev = commands.add_parser(
        "eval", help="score agent runs against the procedures' scenarios", allow_abbrev=False,
        description="Run the eval scenarios (evals/scenarios) with a scripted agent on a simulated fleet and score "
        "each run: the facts its answer holds, the rules it kept and broke. Or score any agent's run: the record "
        "serve --record wrote, its final answer and the scenario.",
        epilog="exit status: 0 the run came out as expected (the reference agent or a scored record passes every "
        "scenario; a faulty agent is caught by its own rule and no other); 3 it did not; 1 an error; 2 a usage "
        "error.",
    )
    ev.add_argument("--agent", default="reference", metavar="NAME",
                    help="reference (default), a faulty agent's name, or all (--list names them)")
    ev.add_argument("--scenario", action="append", default=[], metavar="NAME",
                    help="a scenario's name or .toml path; repeatable (default: every scenario)")
    ev.add_argument("--scenarios-dir", type=Path, default=None, metavar="DIR",
                    help="where the scenarios are (default: evals/scenarios of the checkout)")
    ev.add_argument("--split", choices=("dev", "held-out"), help="only the scenarios of this split (default: both)")
    ev.add_argument("--record", type=Path, default=None, metavar="FILE",
                    help="score this record (written by serve --record) instead of running an agent")
    ev.add_argument("--answer", type=Path, default=None, metavar="FILE", help="the agent's final answer, for --record")
    ev.add_argument("--json", action="store_true", help="print the reports as JSON")
    ev.add_argument("--list", action="store_true", help="list the scenarios, the agents and the rules")
    ev.add_argument("--calibrate", nargs="?", const=True, default=None, metavar="DIR",
                    help="score the labelled runs (default: tests/evals/calibration/runs of the checkout) and print "
                    "the scorer's false-negative and false-positive rates; exit 1 above 5 %% or on a correct run "
                    "failed")
    ev.set_defaults(handler=_eval)


def _eval(args: argparse.Namespace) -> int:
    from radiance_mcp.evals.command import main as eval_main

    args.columns = width()  # the evals import no app code: the terminal's width is handed to them
    return eval_main(args)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _unknown_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> int:
    """An unknown flag of a tool subcommand, refused with the closest valid one (exit 2)."""
    spec: ToolSpec | None = getattr(args, "_tool", None)
    if spec is None:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    names = [word.split("=", 1)[0].lstrip("-").replace("-", "_") for word in extra if word.startswith("-")]
    fields = [*spec.input_model.model_fields, "config", "demo", "json",
              *(name + TEXT_FILE_SUFFIX for name in spec.input_model.model_fields if _is_text(name))]
    message = unknown_names(spec.name.replace("_", "-"), names, fields, _flag) if names else (
        f"unexpected argument {extra[0]!r}: every argument of {spec.name.replace('_', '-')} is a --flag"
    )
    print(said(f"radiance-mcp: {message}", sys.stderr), file=sys.stderr)
    return 2


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give a whole number from 1 to 65535")
    return port


def _plain(text: str, kind: type[int] | type[float], example: str) -> Any:
    """int() and float() take '٢', '５１２０' and '2_0'; a figure on this command line is ASCII digits only."""
    what = "a whole number" if kind is int else "a number"
    try:
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {what} in plain ASCII digits 0-9 (no '_' or other scripts' digits): "
            f"write it like {example}"
        ) from None


def _plain_int(text: str) -> int:
    value: int = _plain(text, int, "5120")
    return value


def _plain_float(text: str) -> float:
    value: float = _plain(text, float, "5120 or 268.11")
    return value


def _positive_int(text: str) -> int:
    value = _plain_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of 1 or more: give a whole number, e.g. 32")
    return value


def _seconds(text: str) -> float:
    value = _plain_float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0: give e.g. 10 or 2.5")
    return value


def _first_paragraph(spec: ToolSpec) -> str:
    return (spec.run.__doc__ or "").strip().split("\n\n")[0]


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="fleet TOML file (default: $RADIANCE_MCP_CONFIG)")


def _add_field(parser: argparse.ArgumentParser, name: str, annotation: Any, help_text: str, required: bool) -> None:
    flag = _flag(name)
    kind = unwrap(annotation)
    if kind is bool:
        parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
    elif typing.get_origin(kind) is Literal:
        parser.add_argument(flag, dest=name, choices=typing.get_args(kind), default=None, help=help_text)
    elif kind in (int, float, str):
        parse = {int: _plain_int, float: _plain_float}.get(kind, str)
        parser.add_argument(flag, dest=name, type=parse, default=None, required=required, help=help_text)
    else:
        parser.add_argument(flag, dest=name, type=_json_arg(name), default=None, required=required,
                            help=help_text if "JSON" in help_text else f"{help_text} (JSON)")


def _json_arg(name: str) -> Any:
    def parse(text: str) -> Any:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"{_flag(name)} takes JSON: {exc.msg}") from exc
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting 100,000 deep
            raise argparse.ArgumentTypeError(f"{_flag(name)} takes plain JSON: {exc}") from exc

    return parse


def _read_text_files(spec: ToolSpec, args: argparse.Namespace) -> None:
    """Each --X-file PATH (or -) becomes the value of --X; giving both is a usage error."""
    for name in spec.input_model.model_fields:
        path = getattr(args, name + TEXT_FILE_SUFFIX, None)
        if path is None:
            continue
        if getattr(args, name) is not None:
            raise InputError(f"give {_flag(name)} or {_flag(name + TEXT_FILE_SUFFIX)}, not both")
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8", errors="surrogateescape") as file:
                    text = file.read()
        except OSError as exc:
            raise InputError(f"{_flag(name + TEXT_FILE_SUFFIX)} {path}: {exc.strerror}; name a readable file") from None
        setattr(args, name, text)


def _run_tool(spec: ToolSpec, args: argparse.Namespace) -> int:
    if args.demo:
        from radiance_mcp.app.demo import background_fleet

        if args.config:
            raise InputError("--demo runs against a simulated fleet with a config of its own: drop --config")
        _exit_on_sigterm()
        with background_fleet() as sim:
            args.config, args.demo = str(sim.config_path), False
            return _run_tool(spec, args)
    try:
        _read_text_files(spec, args)
    except InputError as exc:
        print(said(f"radiance-mcp: {exc}", sys.stderr), file=sys.stderr)
        return 2
    values = {name: getattr(args, name) for name in spec.input_model.model_fields if getattr(args, name) is not None}
    try:
        tool_input = parse_arguments(spec.name.replace("_", "-"), spec.input_model, values, spell=_flag)
    except InputError as exc:
        # The arguments break the tool's input model: a usage error (2), like argparse's own.
        print(said(f"radiance-mcp: {exc}", sys.stderr), file=sys.stderr)
        return 2
    runtime = Runtime(load(args.config), trust_local_paths=True)

    async def run_once() -> BaseModel:
        try:
            if spec.context_param is not None and sys.stderr.isatty():
                return await spec.run(runtime, tool_input, **{spec.context_param: _TerminalProgress()})
            return await spec.run(runtime, tool_input)
        finally:
            await runtime.close()

    if _needs_loop(spec, tool_input, runtime.fleet):
        import asyncio

        output = asyncio.run(run_once())
    else:
        output = drive(run_once())
    if spec.picture is not None and args.svg is not None:
        args.svg.write_text(spec.picture(output), encoding="utf-8")
    if args.json:
        print(output.model_dump_json(indent=2))
    else:
        print(render_plan(output) if spec.name == "plan_free_vram" else render(output))
    return 3 if getattr(output, "ok", True) is False else 0


def _needs_loop(spec: ToolSpec, tool_input: BaseModel, fleet: Fleet) -> bool:
    """Whether the call reaches past given text and this machine's files, as only an event loop can:
    an endpoint (the probes), a host over SSH (a host it names, or a fleet service on one), a
    process (the dry runs of the modes it names) or a wait for a boot to settle (wait_s, which sleeps
    between reads). Every other call runs with no loop (offload.drive): no asyncio to import, its
    reads inline under the same time limit. The one place the CLI decides.
    """
    if spec.name in FAMILIES["probes"] or getattr(tool_input, "wait_s", 0) > 0:
        return True
    given = [name for name, value in tool_input if value is not None]
    if any(name == "host" or name.endswith(("_host", "_mode")) for name in given):
        return True
    services = {getattr(tool_input, name) for name in given if name == "service" or name.endswith("_service")}
    if spec.name == "plan_free_vram" and not {"log", "log_text"} & set(given):
        services = set(fleet.services)  # a service's plan reads its cards' co-tenants; no ledger, the fleet's
    return any(fleet.services[name].host is not None for name in services if name in fleet.services)


class _TerminalProgress:
    """Stands for the MCP request context a long tool reports progress to: on a terminal, one
    line on stderr rewritten in place; piped, the tool gets no context and says nothing."""

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        end = "\n" if total and progress >= total else ""
        print(f"\r\x1b[K  [{done}] {message or ''}", end=end, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# serve


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Terminated(SystemExit):
    """SIGTERM, raised where the main thread stands so every with-block unwinds."""


def _exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C (exit 143), so the served demo's temporary directory is removed.

    By default SIGTERM ends the process where it stands, leaving the simulated fleet's
    directory (its config and ledgers) behind. A second SIGTERM is ignored: it would
    interrupt the first one's unwinding (which background_fleet bounds).
    """

    def handler(signum: int, frame: object) -> None:
        signal.signal(signum, signal.SIG_IGN)
        raise _Terminated(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def _note_sigterm() -> threading.Event:
    """SIGTERM sets the event and raises nothing (serve --demo --http: the HTTP server stops on it).

    An exception raised wherever the main thread stands may leave a lock held that the
    simulated fleet's thread needs to stop: Python 3.11's Logger.setLevel clears the loggers'
    caches holding logging's lock with no try/finally, and the fleet's uvicorn logs as it stops,
    so a SIGTERM there (http_app and uvicorn's config call setLevel) hung the exit for ever.
    Raised in a weakref callback (an import's), it is ignored, and the server served on.
    """
    terminated = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: terminated.set())
    return terminated


def _doctor(args: argparse.Namespace) -> int:
    from radiance_mcp.app.doctor import run_doctor

    if args.demo:
        from radiance_mcp.app.demo import background_fleet

        if args.config:
            raise InputError("--demo checks a simulated fleet with a config of its own: drop --config")
        _exit_on_sigterm()
        with background_fleet() as sim:
            return run_doctor(str(sim.config_path), as_json=args.json)
    return run_doctor(args.config, as_json=args.json)


def _demo(args: argparse.Namespace) -> int:
    from radiance_mcp.app.demo import run_demo

    return run_demo(gates_dir=args.gates_dir)


def _serve(args: argparse.Namespace, terminated: threading.Event | None = None) -> int:
    """terminated: set on SIGTERM (serve --demo --http), which the HTTP server then stops on, even before it runs."""
    from radiance_mcp.app.server import build_server, run_stdio

    if args.demo:
        from radiance_mcp.app.demo import background_fleet

        if args.config:
            raise InputError("--demo serves a simulated fleet with a config of its own: drop --config")
        if args.http:
            terminated = _note_sigterm()
        else:
            _exit_on_sigterm()
        with background_fleet() as sim:
            print(f"radiance-mcp: serving the simulated fleet of {sim.config_path}", file=sys.stderr)
            args.config, args.demo = str(sim.config_path), False
            status = _serve(args, terminated)
        if terminated is not None and terminated.is_set():
            raise _Terminated(128 + signal.SIGTERM)  # ended as the other modes are (main)
        return status
    fleet = load(args.config)
    for name in args.allowed_host:
        try:
            split_allowed_host(name)
        except ValueError as exc:
            raise InputError(f"--allowed-host {exc}") from None
    if args.http:  # every flag checked before the server is built
        token = http_settings.token(args.token, args.token_file)
        limits = http_settings.limits(args.head_timeout, args.max_connections, args.max_connections_per_client)
        if not _is_loopback(args.host) and not token:
            raise InputError(
                f"--host {args.host} is not a loopback address: anyone who can reach it could call the tools; "
                f"set a bearer token with --token-file, {TOKEN_ENV} or --token, or bind 127.0.0.1"
            )
    middleware = []
    if args.record is not None:
        from radiance_mcp.evals.record import Recorder

        middleware.append(Recorder.serving(args.record, __version__, fleet))
    server = build_server(Runtime(fleet), middleware=middleware, submit_answer=args.record is not None)
    if not args.http:
        # stdio: stdout carries the protocol only; the SDK logs to stderr.
        run_stdio(server)
        return 0
    sock = _bind(args.host, args.port)  # before the app: a port in use is a plain error, not uvicorn's exit 3
    _serve_http(server, sock, args.host, [*fleet.server.allowed_hosts, *args.allowed_host], token, limits, terminated)
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or an InputError that says why not and what to do."""
    import errno
    import socket

    where = f"--host {host} --port {port}"
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                     flags=socket.AI_PASSIVE)[0]
        return socket.create_server(address, family=family)
    except socket.gaierror as exc:
        raise InputError(f"{where}: {host!r} does not resolve ({exc.strerror}); bind an address of this "
                         "machine, e.g. 127.0.0.1") from None
    except OSError as exc:
        remedy = {
            errno.EADDRINUSE: "another server (or an earlier radiance-mcp) holds it; stop it or pass another --port",
            errno.EACCES: "ports below 1024 need privileges; pass --port 1024 or above",
            errno.EADDRNOTAVAIL: "that is not an address of this machine; bind one of its addresses, e.g. 127.0.0.1",
        }.get(exc.errno or 0, "check the address and port")
        raise InputError(f"{where}: cannot listen ({exc.strerror}): {remedy}") from None


def _serve_http(server: Any, sock: socket.socket, host: str, extra_hosts: list[str], token: str | None,
                limits: HttpLimits, terminated: threading.Event | None) -> None:
    import hmac

    from radiance_mcp.app.http_guard import serve
    from radiance_mcp.app.server import allowed_hosts, http_app

    app = http_app(server, bind=host, extra_hosts=extra_hosts)
    shown = ", ".join(h for h in allowed_hosts(host, extra_hosts) if not h.endswith(":*"))
    address, port = sock.getsockname()[:2]
    print(f"radiance-mcp: serving http://{f'[{address}]' if ':' in address else address}:{port}/mcp to clients "
          f"that name it {shown} (others get 421: add names with --allowed-host)", file=sys.stderr)
    if token:
        expected = token.encode()
        inner = app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                # RFC 9110: the scheme is case-insensitive ("bearer" is Bearer); the token is not.
                scheme, _, given = dict(scope.get("headers") or []).get(b"authorization", b"").partition(b" ")
                if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(b" "), expected):
                    await send({"type": "http.response.start", "status": 401,
                                "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                    await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                    return
            await inner(scope, receive, send)

    serve(app, sock, limits, terminated)

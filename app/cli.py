"""The `intake` command: serve the API, run the queue, migrate the database, inspect and fix the queue."""

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import Coroutine
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app import __version__
from app.admin import cli as admin_cli
from app.config import Settings
from app.observability.logs import configure_logging


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
        sys.exit(f"intake: invalid settings: {problems}")


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    if args.worker:
        os.environ["EMBEDDED_WORKER"] = "true"  # read by Settings when uvicorn imports app.index
    settings = _settings()
    if settings.environment == "development" and not settings.admin_token:
        _use_development_admin_token()
    uvicorn.run(
        "app.index:app",
        host=args.host or settings.host,
        port=args.port or settings.port,
        # The client address is the socket's peer unless TRUSTED_PROXY_HEADER says otherwise
        # (app/limits/submissions.py): uvicorn must not rewrite it from X-Forwarded-For first.
        proxy_headers=False,
        log_level=settings.log_level.lower(),
        log_config=None,  # keep the JSON logging main() set up
        access_log=False,  # the app logs each request itself, with its request id
    )


DEV_TOKEN_FILE = Path(".intake-admin-token")


def _use_development_admin_token() -> None:
    """Without ADMIN_TOKEN in development, use (and keep) a random token in a local file.

    The token itself is never printed or logged: the file is where a developer reads it.
    """
    if not DEV_TOKEN_FILE.exists():
        DEV_TOKEN_FILE.write_text(secrets.token_urlsafe(24) + "\n")
        DEV_TOKEN_FILE.chmod(0o600)
    os.environ["ADMIN_TOKEN"] = DEV_TOKEN_FILE.read_text().strip()
    logging.getLogger("intake").warning(
        "ADMIN_TOKEN is not set: using the development token in %s (read it with `cat %s`)",
        DEV_TOKEN_FILE.resolve(), DEV_TOKEN_FILE,
    )


def _migrate(args: argparse.Namespace) -> None:
    from app.migrations import upgrade

    settings = _settings()
    upgrade(settings.database_url, args.revision)


def _worker(args: argparse.Namespace) -> None:
    settings = _settings()
    _run_fast(_run_worker(settings))


def _run_fast(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on uvloop where it is installed (uvicorn[standard] brings it), else on asyncio.

    `intake serve` gets uvloop from uvicorn; the worker asks for it here: it spends about a tenth
    less CPU per operation on it (bench/queue_throughput.py).
    """
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


async def _run_worker(settings: Settings) -> None:
    from app.runtime import runtime

    async with runtime(settings) as parts:
        worker = parts.worker()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.stop)
        with contextlib.ExitStack() as stack:
            if settings.worker_metrics_port:
                _serve_worker_metrics(stack, parts)
            await worker.run()


def _serve_worker_metrics(stack: contextlib.ExitStack, parts) -> None:
    """Serve the worker's own metrics at WORKER_METRICS_PORT until `stack` closes."""
    from app.observability.metrics import served

    host, port = parts.settings.host, parts.settings.worker_metrics_port
    try:
        bound = stack.enter_context(served(parts.metrics, host, port))
    except OSError as error:
        sys.exit(f"intake: cannot serve worker metrics on {host}:{port} (WORKER_METRICS_PORT): {error.strerror or error}")
    logging.getLogger("intake.worker").info("worker metrics served", extra={"url": f"http://{host}:{bound}/metrics"})


def _process(args: argparse.Namespace) -> None:
    settings = _settings()
    print(json.dumps(asyncio.run(_process_once(settings, args.limit))))


async def _process_once(settings: Settings, limit: int | None) -> dict:
    from app.runtime import runtime

    async with runtime(settings) as parts:
        return asdict(await parts.processor.run_batch(limit))


def _cleanup(args: argparse.Namespace) -> None:
    settings = _settings()
    print(json.dumps({"deleted": asyncio.run(_prune(settings))}))


async def _prune(settings: Settings) -> int:
    from app.runtime import runtime

    async with runtime(settings) as parts:
        return await parts.processor.prune()


def _print_settings(args: argparse.Namespace) -> None:
    from app.settings_reference import reference

    sys.stdout.write(reference())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="intake", description="Form intake with a durable queue.")
    parser.add_argument("--version", action="version", version=f"intake {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", help="address to listen on (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default: PORT or 8000)")
    serve.add_argument("--worker", action="store_true", help="also run a worker in the same process")
    serve.set_defaults(run=_serve)

    worker = commands.add_parser("worker", help="run operations from the queue until SIGTERM/SIGINT")
    worker.set_defaults(run=_worker)

    process = commands.add_parser("process", help="process one batch, as the cron route does, and print the summary")
    process.add_argument("--limit", type=int, help="operations to claim (default: BATCH_SIZE)")
    process.set_defaults(run=_process)

    cleanup = commands.add_parser("cleanup", help="delete finished operations older than RETENTION_DAYS")
    cleanup.set_defaults(run=_cleanup)

    migrate = commands.add_parser("migrate", help="bring the database schema up to date")
    migrate.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    migrate.set_defaults(run=_migrate)

    settings = commands.add_parser(
        "settings", help="print the configuration reference (Markdown; docs/configuration.md is its output)"
    )
    settings.set_defaults(run=_print_settings)

    admin_cli.register(commands, _settings)
    return parser


def _configure_logging() -> None:
    """JSON lines on stderr (LOG_FORMAT, LOG_LEVEL); invalid settings are reported by the command."""
    try:
        settings = Settings()
    except ValidationError:
        settings = None
    configure_logging(settings.log_format if settings else "json", settings.log_level if settings else "INFO")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `intake` console script."""
    _configure_logging()
    args = _parser().parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()

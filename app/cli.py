"""The `intake` command: serve the API, migrate the database."""

import argparse
import logging
import sys

from pydantic import ValidationError

from app import __version__
from app.config import Settings


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in error.errors())
        sys.exit(f"intake: invalid settings: {problems}")


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    settings = _settings()
    uvicorn.run(
        "app.index:app",
        host=args.host or settings.host,
        port=args.port or settings.port,
        proxy_headers=True,
        log_level="info",
    )


def _migrate(args: argparse.Namespace) -> None:
    from app.migrations import upgrade

    settings = _settings()
    upgrade(settings.database_url, args.revision)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="intake", description="Form intake with a durable queue.")
    parser.add_argument("--version", action="version", version=f"intake {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", help="address to listen on (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default: PORT or 8000)")
    serve.set_defaults(run=_serve)

    migrate = commands.add_parser("migrate", help="bring the database schema up to date")
    migrate.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    migrate.set_defaults(run=_migrate)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `intake` console script."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    args = _parser().parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()

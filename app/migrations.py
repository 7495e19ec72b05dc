"""Running Alembic from Intake: `intake migrate`, the readiness check and the tests."""

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection

_PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _ini_path() -> Path:
    for folder in (_PROJECT_ROOT, Path.cwd()):
        if (folder / "alembic.ini").is_file():
            return folder / "alembic.ini"
    raise FileNotFoundError(f"alembic.ini not found in {_PROJECT_ROOT} or {Path.cwd()}")


def alembic_config(database_url: str | None = None, *, configure_logging: bool = False) -> Config:
    """Alembic's config for this project, aimed at `database_url` (default: Settings)."""
    config = Config(str(_ini_path()))
    config.attributes["database_url"] = database_url
    config.attributes["configure_logging"] = configure_logging
    return config


def upgrade(database_url: str | None = None, revision: str = "head", **options) -> None:
    """Migrate the database to `revision`. Blocking: call it from a thread in async code."""
    command.upgrade(alembic_config(database_url, **options), revision)


@cache
def head_revision() -> str:
    """The newest migration this code ships."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def current_revision(connection: AsyncConnection) -> str | None:
    """The migration the database is at, or None when it was never migrated."""
    try:
        result = await connection.execute(text("SELECT version_num FROM alembic_version"))
    except (ProgrammingError, OperationalError) as error:
        # No such table: a PostgreSQL error leaves the transaction aborted; callers pass a
        # connection of their own and roll it back.
        if "alembic_version" in str(error):
            return None
        raise
    return result.scalar_one_or_none()

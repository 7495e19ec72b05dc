"""The admin dashboard's page, script and styles (served by app.api.dashboard)."""

from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

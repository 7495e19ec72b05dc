"""The configuration reference: docs/configuration.md is `intake settings`, and every setting is explained."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import Settings
from app.settings_reference import reference

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
REGENERATE = ".venv/bin/intake settings > docs/configuration.md"


def test_configuration_page_is_the_generated_reference():
    assert PAGE.read_text() == reference(), (
        f"docs/configuration.md is out of date with app/config.py; regenerate it with `{REGENERATE}`"
    )


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_has_a_description(name):
    description = (Settings.model_fields[name].description or "").strip()
    assert description, f"Settings.{name} needs a description (what it means, when to change it) in app/config.py"


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_every_setting_has_a_row_on_the_page(name):
    assert f"| `{name.upper()}` |" in PAGE.read_text(), f"{name.upper()} is missing; regenerate with `{REGENERATE}`"


def test_secrets_are_marked_and_their_defaults_never_shown():
    rows = {line.split("|")[1].strip(): line for line in reference().splitlines() if line.startswith("| `")}
    assert "*Secret.*" in rows["`ADMIN_TOKEN`"]
    assert "*Secret.*" not in rows["`DATABASE_URL`"]


def test_durations_carry_their_unit():
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in reference().splitlines() if line.startswith("| `")}
    assert rows["`OPERATION_TIMEOUT`"] == "`30` s"
    assert rows["`RETENTION_DAYS`"] == "`30` days"


def test_intake_settings_prints_the_reference():
    done = subprocess.run([sys.executable, "-m", "app.cli", "settings"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == reference()


#: Upper-case words the docs put in backticks that are not settings: log levels, a Plaid error
#: code, an HTTP method, the quickstart's shell variables, the test suite's database.
NOT_SETTINGS = {"DEBUG", "INFO", "WARNING", "ERROR", "PATCH", "PRODUCT_NOT_READY", "INTAKE", "FORM_ID", "SUBMISSION_ID", "TEST_DATABASE_URL"}
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_setting_the_docs_name_exists(page):
    named = set(re.findall(r"`([A-Z][A-Z0-9_]{3,})`", page.read_text())) - NOT_SETTINGS
    unknown = sorted(named - {name.upper() for name in Settings.model_fields})
    assert not unknown, f"{page.name} names settings that app/config.py does not have: {unknown}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_metric_the_docs_name_exists(page):
    source = (ROOT / "app" / "observability" / "metrics.py").read_text()
    named = {n for n in re.findall(r"\bintake_[a-z_]+[a-z]", page.read_text()) if not n.startswith("intake_test")}
    # The exposition adds these suffixes to a counter's or histogram's name.
    unknown = sorted(n for n in named if f'"{re.sub(r"_(total|bucket|count|sum|created)$", "", n)}"' not in source)
    assert not unknown, f"{page.name} names metrics that app/observability/metrics.py does not define: {unknown}"

"""vercel.json against the code: the entrypoint exists, each cron path is a real route, the budget fits."""

import ast
import json

import pytest

from app.config import Settings
from tests.api.conftest import CRON_SECRET, make_settings, serve
from tests.deploy.files import ROOT, api_routes

#: Seconds a processing call needs beyond TIME_BUDGET: a cold start, the app's startup, resetting
#: stale rows and claiming before the budget's clock starts, and writing the last outcomes.
MARGIN = 10

VERCEL = json.loads((ROOT / "vercel.json").read_text())
CRONS = {cron["path"]: cron["schedule"] for cron in VERCEL["crons"]}


def test_the_function_is_the_module_that_exports_the_app():
    assert list(VERCEL["functions"]) == ["app/index.py"]
    tree = ast.parse((ROOT / "app/index.py").read_text())
    assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    assert "app" in assigned


def test_the_crons_are_process_every_minute_and_cleanup_daily():
    assert CRONS["/api/queue/process"] == "* * * * *"
    minute, hour, *rest = CRONS["/api/queue/cleanup"].split()
    assert minute.isdigit() and hour.isdigit() and rest == ["*", "*", "*"]
    assert set(CRONS) == {"/api/queue/process", "/api/queue/cleanup"}


def test_every_cron_path_is_a_route_answering_get():
    routes = api_routes()
    for path in CRONS:
        assert "GET" in routes.get(path, set()), f"{path}: no GET route"


@pytest.mark.parametrize("path", sorted(CRONS))
async def test_every_cron_path_answers_vercels_request(database_url, engine, path):
    """Vercel Cron sends GET with `Authorization: Bearer $CRON_SECRET`; nothing else."""
    async with serve(make_settings(database_url)) as client:
        answered = await client.get(path, headers={"Authorization": f"Bearer {CRON_SECRET}"})
        refused = await client.get(path)
    assert answered.status_code == 200, answered.text
    assert refused.status_code == 401


def test_time_budget_and_a_margin_fit_max_duration():
    max_duration = VERCEL["functions"]["app/index.py"]["maxDuration"]
    defaults = Settings.model_fields
    budget, timeout = defaults["time_budget"].default, defaults["operation_timeout"].default
    assert budget + MARGIN <= max_duration, f"TIME_BUDGET {budget} s + {MARGIN} s does not fit maxDuration {max_duration} s"
    assert timeout < budget  # one whole operation fits in a call (Settings enforces it too)
    assert Settings(_env_file=None).time_budget == budget

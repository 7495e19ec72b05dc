"""schemathesis over the live OpenAPI schema: every route, with the admin and cron tokens.

The app (create_app on the test's database, SQLite and PostgreSQL) is served by uvicorn on
127.0.0.1 in a thread, seeded with a form that has a webhook (to the fake receiver), a
submission and its processed operation, so that routes taking ids have something to find.
For each operation schemathesis generates a few requests, valid and invalid, and checks every
answer: no 5xx, a documented status code, the documented content type, a body matching its
schema. Run it alone with `pytest -m schemathesis`.

Left out: schemathesis's `positive_data_acceptance`, which expects every schema-valid request to
succeed. Intake checks more than JSON Schema can say (a notification needs email or sms, a
`to_field` must name a field of the form, a submission must match its form's fields), so a
schema-valid request is rightly a 422 there. And `negative_data_rejection`, which expects unknown
query parameters to be refused: like most HTTP APIs, Intake ignores them. Negative requests are
still sent, and their answers still checked (no 5xx, documented status, type and body).
"""

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from hypothesis.errors import Unsatisfiable
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from app.main import create_app
from tests.api.conftest import ADMIN_TOKEN, CRON_SECRET, make_settings
from tests.api.factories import make_data, make_form

pytestmark = pytest.mark.schemathesis

#: Generated requests per API operation: enough to go through each route's branches, bounded so the
#: whole test stays within a few minutes on each database.
MAX_EXAMPLES = 15

EXCLUDED = [positive_data_acceptance, negative_data_rejection]

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CRON = {"Authorization": f"Bearer {CRON_SECRET}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def live_url(database_url, webhook_receiver) -> Iterator[str]:
    """The app on a real port, seeded; its base URL."""
    app_settings = make_settings(database_url, operation_timeout=2, time_budget=5, max_batch_size=20)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(app_settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    _seed(url, webhook_receiver.url_for())
    yield url
    server.should_exit = True
    thread.join(timeout=20)


def _seed(url: str, hook: str) -> None:
    """A form with a webhook, a submission, its webhook delivered: ids for the routes to find."""
    with httpx.Client(base_url=url, timeout=30) as client:
        integrations = [{"id": "crm-hook", "type": "webhook", "url": hook}]
        form = client.post("/api/forms", json=make_form(integrations=integrations), headers=ADMIN)
        assert form.status_code == 201, form.text
        sent = client.post(f"/api/forms/{form.json()['id']}/submissions", json={"data": make_data()})
        assert sent.status_code == 201, sent.text
        processed = client.post("/api/queue/process", headers=CRON)
        assert processed.json()["completed"] == 1, processed.text


def _token(case) -> dict[str, str]:
    """The bearer the operation asks for: the cron secret for the cron routes, else the admin token."""
    security = case.operation.definition.raw.get("security") or []
    names = {name for requirement in security for name in requirement}
    return CRON if "CronSecret" in names else ADMIN


def _check(operation, mode: GenerationMode) -> None:
    """Up to MAX_EXAMPLES requests of `mode` to one operation; each answer checked against the schema."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              derandomize=True, phases=[Phase.explicit, Phase.generate])
    def check(case) -> None:
        case.call_and_validate(headers=_token(case), timeout=30, excluded_checks=EXCLUDED)

    check()


# (schemathesis.pytest.from_fixture would make one subtest per operation, but it does not run under
# pytest 9: it sets a node attribute pytest no longer has. The loop below does what it does.)
def test_every_route_answers_as_documented(live_url):
    schema = schemathesis.openapi.from_url(f"{live_url}/openapi.json")
    failures, checked = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            checked += 1
            try:
                _check(operation, mode)
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE, operation.label  # no input to get wrong
            except (Exception, BaseExceptionGroup) as failure:  # every operation's failures are reported at the end
                failures.append(f"{operation.label} ({mode.value}): {failure}")
    assert checked >= 60, checked  # every route, both ways
    assert not failures, "\n\n".join(failures)

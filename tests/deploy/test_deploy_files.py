"""deploy/: the compose file, the Kubernetes CronJobs and the crontab parse and point at real things."""

import re
import shlex
from urllib.parse import urlsplit

import pytest
import yaml

from app.config import Settings
from tests.deploy.files import ROOT, api_routes, intake_subcommands

DEPLOY = ROOT / "deploy"
DEFAULTS = {name: field.default for name, field in Settings.model_fields.items()}
CRON_FIELD = re.compile(r"^(\*|\d+)(/\d+)?$")


def assert_schedule(schedule: str) -> None:
    fields = schedule.split()
    assert len(fields) == 5 and all(CRON_FIELD.match(f) for f in fields), schedule


# --- docker compose ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def intake_services(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if s.get("image") == "intake:local"}


def test_compose_has_postgres_migrate_api_and_worker(compose):
    assert {"db", "migrate", "api", "worker"} <= set(compose["services"])
    assert compose["services"]["db"]["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(compose["services"]["db"]["healthcheck"]["test"])
    assert set(intake_services(compose)) >= {"migrate", "api", "worker"}


def test_compose_commands_are_real_intake_subcommands(compose):
    subcommands = intake_subcommands()
    expected = {"migrate": "migrate", "api": "serve", "worker": "worker"}
    for name, service in intake_services(compose).items():
        command = service["command"]
        if service.get("entrypoint"):  # a shell loop around the command
            words = shlex.split(" ".join(command).replace(";", " "))
            used = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "intake"]
        else:
            used = [command[0]]
        assert used and all(u in subcommands for u in used), (name, command)
        if name in expected:
            assert used == [expected[name]]


def test_compose_builds_the_repositorys_dockerfile(compose):
    for service in intake_services(compose).values():
        context = (DEPLOY / service["build"]["context"]).resolve()
        assert (context / service["build"]["dockerfile"]) == ROOT / "Dockerfile"


def test_compose_migrates_once_before_the_rest_starts(compose):
    services = compose["services"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    for name, service in intake_services(compose).items():
        if name != "migrate":
            assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name


def test_compose_runs_in_production_with_its_secrets_required(compose):
    for service in intake_services(compose).values():
        env = service["environment"]
        assert env["ENVIRONMENT"] == "production"
        assert urlsplit(env["DATABASE_URL"]).hostname == "db"
        assert env["CRON_SECRET"].startswith("${CRON_SECRET:?") and env["ADMIN_TOKEN"].startswith("${ADMIN_TOKEN:?")


def test_compose_workers_skip_the_http_healthcheck_and_get_their_grace(compose):
    worker = compose["services"]["worker"]
    assert worker["healthcheck"] == {"disable": True}
    assert int(worker["stop_grace_period"].rstrip("s")) > DEFAULTS["shutdown_grace"]
    assert compose["services"]["api"]["ports"] == ["8000:8000"]


# --- Kubernetes ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cronjobs() -> list[dict]:
    documents = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes/cronjob.yaml").read_text()) if d]
    assert all(d["kind"] == "CronJob" and d["apiVersion"] == "batch/v1" for d in documents)
    return documents


def curl_call(args: list[str]) -> tuple[str, str, str]:
    """(method, path, Authorization header) of a curl command line."""
    method = args[args.index("--request") + 1] if "--request" in args else "GET"
    header = args[args.index("--header") + 1]
    url = next(a for a in args if a.startswith(("http://", "https://")))
    return method, urlsplit(url).path, header


def test_cronjobs_call_the_queue_routes_with_the_bearer_from_a_secret(cronjobs):
    paths = api_routes()
    called = {}
    for job in cronjobs:
        assert_schedule(job["spec"]["schedule"])
        container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["curl"]
        method, path, header = curl_call(container["args"])
        assert method in paths[path], (path, method)
        assert header == "Authorization: Bearer $(CRON_SECRET)"
        env = {e["name"]: e for e in container["env"]}
        assert env["CRON_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "intake-cron", "key": "CRON_SECRET"}
        called[path] = job["spec"]["schedule"]
    assert called["/api/queue/process"] == "* * * * *"
    assert set(called) == {"/api/queue/process", "/api/queue/cleanup"}


def test_the_process_cronjob_outlives_a_processing_call_and_never_overlaps(cronjobs):
    job = next(j for j in cronjobs if j["metadata"]["name"] == "intake-process-queue")
    args = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert float(args[args.index("--max-time") + 1]) > DEFAULTS["time_budget"]
    assert job["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] > DEFAULTS["time_budget"]
    assert job["spec"]["concurrencyPolicy"] == "Forbid"


# --- crontab -------------------------------------------------------------------------------------


def test_the_crontab_lines_call_the_queue_routes_with_a_header_file():
    lines = [line for line in (DEPLOY / "crontab").read_text().splitlines() if line.strip() and not line.startswith("#")]
    paths, called = api_routes(), {}
    for line in lines:
        words = line.split()
        schedule, command = " ".join(words[:5]), shlex.split(" ".join(words[5:]).split(">")[0])
        assert_schedule(schedule)
        assert command[0] == "curl"
        method, path, header = curl_call(command)
        assert method in paths[path], (path, method)
        assert header.startswith("@/"), "the bearer comes from a file, not the crontab"
        called[path] = schedule
    assert called["/api/queue/process"] == "* * * * *"
    assert set(called) == {"/api/queue/process", "/api/queue/cleanup"}


def test_the_readme_shows_how_to_use_each_file():
    readme = (DEPLOY / "README.md").read_text()
    for command in ("docker compose -f deploy/docker-compose.yml up", "kubectl apply -f deploy/kubernetes/cronjob.yaml",
                    "crontab deploy/crontab", "docker build -t intake ."):
        assert command in readme, command

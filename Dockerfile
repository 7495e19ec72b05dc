# syntax=docker/dockerfile:1
# Intake. `docker run IMAGE` serves the API on 0.0.0.0:8000; `docker run IMAGE worker` runs the
# queue worker; `docker run IMAGE migrate` brings the database schema up to date (never done
# silently at start). Any other `intake` subcommand works the same way: `docker run IMAGE --help`.
# Examples with PostgreSQL: deploy/docker-compose.yml and deploy/README.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- builder: a virtual environment with Intake and its pinned dependencies --------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Dependencies first, from the pinned constraints: this layer is rebuilt only when they change.
# (app/__init__.py holds the version, which pyproject.toml reads.)
COPY pyproject.toml constraints.txt README.md ./
COPY app/__init__.py app/__init__.py
RUN pip install --no-cache-dir -c constraints.txt .

# Then the code; its dependencies are already there.
COPY app ./app
RUN pip install --no-cache-dir --no-deps --force-reinstall .

# --- runtime: the slim image, the venv, the migrations, a user without privileges ---------------
FROM ${PYTHON_IMAGE} AS runtime

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOST=0.0.0.0 \
    PORT=8000 \
    DATABASE_URL=sqlite+aiosqlite:////data/intake.db

RUN groupadd --system --gid 10001 intake \
    && useradd --system --uid 10001 --gid intake --home-dir /app --no-create-home --shell /usr/sbin/nologin intake \
    && mkdir /data \
    && chown intake:intake /data

COPY --from=builder /opt/venv /opt/venv
# `intake migrate` finds alembic.ini in the working directory (app/migrations.py).
WORKDIR /app
COPY alembic.ini ./
COPY alembic ./alembic

# Numeric, so that orchestrators (runAsNonRoot) can tell it is not root.
USER 10001:10001
EXPOSE 8000

# Liveness of `intake serve` (slim has no curl). A worker serves no HTTP: run it with
# --no-healthcheck, or `healthcheck: disable: true` in compose, as deploy/docker-compose.yml does.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PORT', '8000') + '/healthz', timeout=4)"]

ENTRYPOINT ["intake"]
CMD ["serve"]

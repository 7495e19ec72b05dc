# syntax=docker/dockerfile:1
# Intake: `docker run IMAGE` serves the API; `docker run IMAGE intake migrate` migrates first.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOST=0.0.0.0 \
    PORT=8000

WORKDIR /app
COPY pyproject.toml constraints.txt README.md alembic.ini ./
COPY alembic ./alembic
COPY app ./app
RUN pip install -c constraints.txt . \
    && useradd --create-home --uid 10001 intake

USER intake
EXPOSE 8000
CMD ["intake", "serve"]

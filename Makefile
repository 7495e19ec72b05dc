# Two commands on a fresh machine: `make run` and `make test`. Both build .venv with the pinned
# versions of constraints.txt first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: run test bench lock clean

$(INSTALLED): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

BENCH_INSTALLED := $(VENV)/.installed-bench

$(BENCH_INSTALLED): $(INSTALLED)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $@

## make run: migrate the database (a SQLite file here by default) and serve on 127.0.0.1:8000,
## with a worker in the same process. Local webhook receivers (127.0.0.1) are allowed here only.
run: export WEBHOOK_ALLOW_PRIVATE_NETWORKS ?= true
run: $(INSTALLED)
	$(BIN)/intake migrate
	$(BIN)/intake serve --worker

## make test: the whole suite; the PostgreSQL half runs when TEST_DATABASE_URL is set
test: $(INSTALLED)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## make bench: the benchmarks of issue 6 on the local PostgreSQL (BENCH_DATABASE_URL or TEST_DATABASE_URL
## to use another server); prints figures and ratios, asserts nothing. BENCH_ARGS=--quick for a smoke run.
bench: $(BENCH_INSTALLED)
	$(BIN)/python -m bench.run_all $(BENCH_ARGS)

## make lock: re-pin constraints.txt to what is installed now
lock: $(INSTALLED)
	$(BIN)/python -m pip freeze --exclude-editable --disable-pip-version-check | grep -v '^-e ' > constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache

"""Without Chromium the browser tests are skipped, and the run says so in one line (-rfE lists no skips)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_browser_tests(chromium: str, *args: str) -> subprocess.CompletedProcess:
    """pytest on tests/browser in a child process, with INTAKE_CHROMIUM pointing at `chromium`."""
    env = {k: v for k, v in os.environ.items() if k not in {"TEST_DATABASE_URL", "INTAKE_REQUIRE_BROWSER", "INTAKE_REQUIRE_POSTGRES", "PYTEST_ADDOPTS"}}
    env["INTAKE_CHROMIUM"] = chromium
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/browser", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_run_without_chromium_says_in_one_line_that_browser_tests_were_skipped(tmp_path):
    done = run_browser_tests(str(tmp_path / "no-chromium"))
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("Browser tests SKIPPED")]
    assert str(tmp_path / "no-chromium") in line and "install Debian's chromium" in line
    assert "passed" not in done.stdout.splitlines()[-1]  # they were skipped, not run


def test_a_run_with_chromium_prints_no_skip_line():
    done = run_browser_tests(sys.executable, "--collect-only")  # any file that exists stands for Chromium
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Browser tests SKIPPED" not in done.stdout
    assert "test_smoke.py" in done.stdout

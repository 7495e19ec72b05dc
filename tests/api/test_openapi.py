"""The OpenAPI schema a newcomer reads at /docs: every route described, tagged, its errors declared,
its examples valid against its own schemas."""

import json
from typing import Any

import jsonschema_rs
import pytest

from app.main import create_app
from tests.api.conftest import make_settings

AUDIENCES = {"applicant", "cron", "admin", "operator"}

#: Every status each route can answer, as far as the code shows (500 excepted: it is a bug).
KNOWN: dict[tuple[str, str], set[int]] = {
    ("get", "/healthz"): {200},
    ("get", "/readyz"): {200, 503},
    ("get", "/metrics"): {200},
    ("get", "/admin"): {200},
    ("get", "/f/{form_id}"): {200, 404, 503},
    ("post", "/f/{form_id}"): {303, 400, 403, 404, 409, 413, 415, 422, 429, 503},
    ("get", "/f/{form_id}/thanks"): {200, 404, 503},
    ("get", "/api/forms/{form_id}"): {200, 404, 422, 503},
    ("post", "/api/forms/{form_id}/submissions"): {200, 201, 400, 404, 409, 413, 415, 422, 429, 503},
    ("post", "/api/forms"): {201, 400, 401, 413, 415, 422, 503},
    ("get", "/api/forms"): {200, 401, 422, 503},
    ("get", "/api/forms/{form_id}/admin"): {200, 401, 404, 422, 503},
    ("patch", "/api/forms/{form_id}"): {200, 400, 401, 404, 413, 415, 422, 503},
    ("post", "/api/forms/{form_id}/close"): {200, 401, 404, 422, 503},
    ("get", "/api/submissions/{submission_id}"): {200, 401, 404, 422, 503},
    ("patch", "/api/submissions/{submission_id}"): {200, 400, 401, 404, 409, 413, 415, 422, 503},
    ("get", "/api/queue/process"): {200, 401, 422, 503},
    ("post", "/api/queue/process"): {200, 401, 422, 503},
    ("get", "/api/queue/cleanup"): {200, 401, 503},
    ("post", "/api/queue/cleanup"): {200, 401, 503},
    ("get", "/api/queue/status"): {200, 401, 422, 503},
    ("get", "/api/operations"): {200, 401, 422, 503},
    ("get", "/api/operations/{operation_id}"): {200, 401, 404, 422, 503},
    ("post", "/api/operations/{operation_id}/cancel"): {200, 401, 404, 409, 422, 503},
    ("get", "/api/audit"): {200, 401, 422, 503},
    ("get", "/api/dlq"): {200, 401, 422, 503},
    ("get", "/api/dlq/stats"): {200, 401, 503},
    ("post", "/api/dlq/retry"): {200, 400, 401, 413, 415, 422, 503},
    ("get", "/api/dlq/{operation_id}"): {200, 401, 404, 422, 503},
    ("post", "/api/dlq/{operation_id}/retry"): {200, 401, 404, 409, 422, 503},
    ("post", "/api/dlq/{operation_id}/discard"): {200, 401, 404, 409, 422, 503},
}

ERROR_MODELS = {"#/components/schemas/ErrorOut", "#/components/schemas/ValidationErrorOut"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> dict[str, Any]:
    app = create_app(make_settings(f"sqlite:///{tmp_path_factory.mktemp('openapi')}/unused.db"))
    return app.openapi()


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def test_every_known_route_is_in_the_schema_and_nothing_else(spec):
    assert {(method, path) for method, path, _ in operations(spec)} == set(KNOWN)


def test_every_route_has_a_summary_a_description_and_an_audience(spec):
    for method, path, op in operations(spec):
        where = f"{method.upper()} {path}"
        assert op.get("summary"), f"{where} has no summary"
        assert len(op.get("description", "")) >= 40, f"{where} has no real description"
        assert op.get("tags") and set(op["tags"]) <= AUDIENCES, f"{where} tags {op.get('tags')}"


def test_every_route_declares_the_statuses_it_can_answer(spec):
    for method, path, op in operations(spec):
        declared = {int(code) for code in op["responses"]}
        missing = KNOWN[(method, path)] - declared
        assert not missing, f"{method.upper()} {path} does not declare {sorted(missing)}"


def test_authenticated_routes_declare_401_and_routes_with_input_declare_422(spec):
    for method, path, op in operations(spec):
        declared = set(op["responses"])
        if op.get("security"):
            assert "401" in declared, f"{method.upper()} {path}"
        # The HTML pages answer a bad id with their 404 page; what they can refuse as 422 is the body.
        html_page = "text/html" in op["responses"].get("200", {}).get("content", {})
        validated = [p for p in op.get("parameters", []) if not _plain_string(p["schema"]) and not html_page]
        if op.get("requestBody") or validated:
            assert "422" in declared, f"{method.upper()} {path}"


def _plain_string(schema: dict[str, Any]) -> bool:
    """A parameter no value of which FastAPI refuses: a bare (optional) string."""
    kinds = schema.get("anyOf", [schema])
    return all(set(k) - {"title", "description"} == {"type"} and k["type"] in ("string", "null") for k in kinds)


def test_json_errors_use_the_shared_error_models(spec):
    for method, path, op in operations(spec):
        for code, response in op["responses"].items():
            if not code.startswith(("4", "5")):
                continue
            json_body = response.get("content", {}).get("application/json")
            if json_body is not None:
                assert json_body["schema"].get("$ref") in ERROR_MODELS, f"{method.upper()} {path} {code}"


def test_admin_and_cron_routes_use_their_bearer_schemes(spec):
    schemes = spec["components"]["securitySchemes"]
    assert {name: (s["type"], s["scheme"]) for name, s in schemes.items()} == {
        "AdminToken": ("http", "bearer"),
        "CronSecret": ("http", "bearer"),
    }
    for method, path, op in operations(spec):
        names = {name for requirement in op.get("security", []) for name in requirement}
        if path.startswith("/api/queue/") and path != "/api/queue/status":
            assert names == {"CronSecret"}, f"{method.upper()} {path}"
        elif "admin" in op["tags"] or path == "/api/queue/status":
            assert names == {"AdminToken"}, f"{method.upper()} {path}"
        else:
            assert not names, f"{method.upper()} {path}"


def test_tags_and_the_description_tell_a_newcomer_how_to_start(spec):
    tags = {tag["name"]: tag["description"] for tag in spec["tags"]}
    assert set(tags) == AUDIENCES and all(len(text) > 40 for text in tags.values())
    description = spec["info"]["description"]
    for words in ("ADMIN_TOKEN", "CRON_SECRET", "Authorize", "Authorization: Bearer"):
        assert words in description


def test_every_model_and_response_has_examples_that_validate(spec):
    examples = list(_examples(spec))
    schemas = spec["components"]["schemas"]
    with_examples = {where.split(" ")[0] for where, _, _ in examples}
    for model in ("ErrorOut", "ValidationErrorOut", "SubmissionIn", "SubmissionReceipt", "NewForm", "SavedFormOut",
                  "SubmissionOut", "ProcessResult", "QueueStatus", "OperationDetail", "DeadPage", "BulkRetry"):
        assert model in schemas and f"#/components/schemas/{model}" in with_examples, model
    for where, schema, example in examples:
        validator = jsonschema_rs.validator_for({"components": spec["components"]} | schema)
        problems = [error.message for error in validator.iter_errors(example)]
        assert not problems, f"{where}: {json.dumps(example)[:200]} -> {problems}"


def test_a_wrong_example_is_caught(spec):
    # The check above can fail: an example that breaks its schema is reported.
    schema = {"$ref": "#/components/schemas/SubmissionReceipt"}
    validator = jsonschema_rs.validator_for({"components": spec["components"]} | schema)
    assert list(validator.iter_errors({"id": "not-a-uuid-and-no-form_id"}))


def _examples(spec: dict[str, Any]):
    """(where, schema, example) for every example in components and in request and response bodies."""
    for name, schema in spec["components"]["schemas"].items():
        for example in schema.get("examples", []):
            yield f"#/components/schemas/{name} model", {"$ref": f"#/components/schemas/{name}"}, example
    for method, path, op in operations(spec):
        bodies = [("request", op.get("requestBody", {}))] + list(op["responses"].items())
        for code, body in bodies:
            for media, content in body.get("content", {}).items():
                if "example" in content and "schema" in content:
                    yield f"{method.upper()} {path} {code} {media}", content["schema"], content["example"]

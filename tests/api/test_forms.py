"""The forms API: create, read (public and admin), list, update, close; secrets shown once."""

import uuid

import pytest
from sqlalchemy import select, update

from app.models import Form

from tests.api.factories import ADMIN, create_form, every_integration, make_fields, make_form

WEBHOOK = {"type": "webhook", "url": "https://hooks.example.com/a"}


async def test_create_returns_the_form_with_generated_ids_and_a_one_time_secret(client):
    form = await create_form(client, integrations=[WEBHOOK, {"id": "mine", **WEBHOOK}])
    [generated, mine] = form["integrations"]
    assert generated["id"].startswith("webhook-")
    assert mine["id"] == "mine"
    assert set(form["webhook_secrets"]) == {generated["id"], "mine"}
    assert all(s.startswith("whsec_") and len(s) >= 6 + 32 for s in form["webhook_secrets"].values())
    assert "secret" not in generated

    again = await client.get(f"/api/forms/{form['id']}/admin", headers=ADMIN)
    assert again.status_code == 200
    assert "webhook_secrets" not in again.json()
    assert "whsec_" not in again.text


async def test_the_public_definition_has_fields_and_no_integrations(client):
    form = await create_form(client, integrations=every_integration())
    response = await client.get(f"/api/forms/{form['id']}")
    assert response.status_code == 200
    assert set(response.json()) == {"id", "name", "status", "fields"}
    assert [f["name"] for f in response.json()["fields"]] == [f["name"] for f in make_fields()]


async def test_unknown_form_is_404_for_everyone(client):
    missing = uuid.uuid4()
    assert (await client.get(f"/api/forms/{missing}")).status_code == 404
    assert (await client.get(f"/api/forms/{missing}/admin", headers=ADMIN)).status_code == 404
    assert (await client.patch(f"/api/forms/{missing}", json={"name": "x"}, headers=ADMIN)).status_code == 404
    assert (await client.post(f"/api/forms/{missing}/close", headers=ADMIN)).status_code == 404


@pytest.mark.parametrize(
    ("integration", "loc_end", "words"),
    [
        ({"type": "fax", "number": "1"}, [], "tag"),
        ({"type": "webhook"}, ["webhook", "url"], "required"),
        ({"type": "email", "to_field": "mail"}, [], "'mail' is not a field of this form"),
        ({"type": "sms", "to_field": "email", "body": "hi"}, [], "is a email field, expected phone"),
        ({"type": "sms", "to_field": "phone", "body": "Hi {{ nick }}"}, [], "{{ nick }}"),
        ({"type": "webhook", "url": "https://h.example.com", "secret": "whsec_mine"}, ["secret"], "cannot be set"),
    ],
)
async def test_bad_integrations_are_422_naming_the_problem(client, engine, integration, loc_end, words):
    response = await client.post("/api/forms", json=make_form(integrations=[integration]), headers=ADMIN)
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"][:2] == ["body", "integrations"]
    if loc_end:
        assert problem["loc"][-len(loc_end):] == loc_end
    assert words in problem["msg"]
    listed = await client.get("/api/forms", headers=ADMIN)
    assert listed.json()["items"] == []


async def test_duplicate_field_names_are_422(client):
    fields = make_fields() + [{"name": "email", "type": "text"}]
    response = await client.post("/api/forms", json=make_form(fields=fields), headers=ADMIN)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "fields"]
    assert "'email' is used more than once" in response.json()["detail"][0]["msg"]


async def test_patch_changes_only_what_is_given(client):
    form = await create_form(client, integrations=[{"id": "hook", **WEBHOOK}])
    response = await client.patch(f"/api/forms/{form['id']}", json={"name": "Renamed"}, headers=ADMIN)
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "Renamed"
    assert body["fields"] == form["fields"]
    assert body["integrations"] == form["integrations"]
    assert body["webhook_secrets"] == {}


async def test_integration_ids_and_secrets_survive_an_update(client, engine):
    form = await create_form(client, integrations=[WEBHOOK])
    [entry] = form["integrations"]
    secret = form["webhook_secrets"][entry["id"]]
    changed = {**entry, "url": "https://hooks.example.com/moved"}
    added = {"type": "webhook", "url": "https://other.example.com/x"}
    response = await client.patch(
        f"/api/forms/{form['id']}", json={"integrations": [changed, added]}, headers=ADMIN
    )
    assert response.status_code == 200
    [kept, new] = response.json()["integrations"]
    assert kept["id"] == entry["id"] and kept["url"] == "https://hooks.example.com/moved"
    assert list(response.json()["webhook_secrets"]) == [new["id"]]  # only the new entry's secret
    assert secret not in response.text
    assert await stored_secret(engine, form["id"], entry["id"]) == secret


async def stored_secret(engine, form_id, integration_id):
    async with engine.connect() as connection:
        integrations = (await connection.execute(select(Form.integrations).where(Form.id == uuid.UUID(form_id)))).scalar_one()
    return next(e for e in integrations if e["id"] == integration_id).get("secret")


async def test_removing_a_field_an_integration_reads_is_422(client):
    form = await create_form(client, integrations=[{"type": "email", "to_field": "email"}])
    fields = [f for f in make_fields() if f["name"] != "email"]
    response = await client.patch(f"/api/forms/{form['id']}", json={"fields": fields}, headers=ADMIN)
    assert response.status_code == 422
    assert "'email' is not a field of this form" in response.json()["detail"][0]["msg"]


async def test_re_enabling_an_integration_clears_its_disabled_reason(client, engine):
    form = await create_form(client, integrations=[{"id": "hook", **WEBHOOK}])
    gone = [{**form["integrations"][0], "enabled": False, "disabled_reason": "410 Gone from receiver"}]
    async with engine.begin() as connection:  # what the processor does on a 410
        await connection.execute(update(Form).where(Form.id == uuid.UUID(form["id"])).values(integrations=gone))

    shown = (await client.get(f"/api/forms/{form['id']}/admin", headers=ADMIN)).json()["integrations"][0]
    assert shown["enabled"] is False and shown["disabled_reason"] == "410 Gone from receiver"
    # Sending the disabled entry back as it is keeps Intake's reason.
    kept = await client.patch(f"/api/forms/{form['id']}", json={"integrations": [shown]}, headers=ADMIN)
    assert kept.json()["integrations"][0]["disabled_reason"] == "410 Gone from receiver"

    response = await client.patch(
        f"/api/forms/{form['id']}", json={"integrations": [{**shown, "enabled": True}]}, headers=ADMIN
    )
    assert response.status_code == 200
    entry = response.json()["integrations"][0]
    assert entry["enabled"] is True and "disabled_reason" not in entry
    assert response.json()["webhook_secrets"] == {}  # the same entry: it keeps its secret


async def test_close_and_reopen(client):
    form = await create_form(client)
    closed = await client.post(f"/api/forms/{form['id']}/close", headers=ADMIN)
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    assert (await client.post(f"/api/forms/{form['id']}/close", headers=ADMIN)).status_code == 200
    reopened = await client.patch(f"/api/forms/{form['id']}", json={"status": "active"}, headers=ADMIN)
    assert reopened.json()["status"] == "active"


async def test_list_pages_newest_first_and_filters_by_status(client):
    ids = [(await create_form(client, name=f"form {n}"))["id"] for n in range(5)]
    await client.post(f"/api/forms/{ids[0]}/close", headers=ADMIN)
    seen, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/api/forms", params=params, headers=ADMIN)).json()
        seen += [item["id"] for item in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    closed = (await client.get("/api/forms", params={"status": "closed"}, headers=ADMIN)).json()
    assert [item["id"] for item in closed["items"]] == [ids[0]]
    bad = await client.get("/api/forms", params={"cursor": "nonsense"}, headers=ADMIN)
    assert bad.status_code == 422

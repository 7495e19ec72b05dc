"""The hosted form page over HTTP, as a browser without JavaScript uses it: GET, then a form POST."""

import uuid

import pytest

from tests.api.factories import ADMIN, count_rows, create_form, make_data
from tests.web.html import Page

TOKEN = "csrf-token"

#: Valid answers for make_fields(), as an HTML form sends them.
FORM_VALUES = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "phone": "+1 415 555 2671",
    "age": "36",
    "agree": "true",
    "dob": "1815-12-10",
    "plan": "pro",
    "plaid_public_token": "public-sandbox-123",
}
WEBHOOK = {"id": "crm-hook", "type": "webhook", "url": "https://hooks.example.com/intake"}


async def open_form(client, form_id) -> tuple[Page, str]:
    """GET the page (which sets the CSRF cookie); the parsed page and its token."""
    response = await client.get(f"/f/{form_id}")
    assert response.status_code == 200, response.text
    page = Page(response.text)
    return page, page.find("input", name=TOKEN).attrs["value"]


async def post_form(client, form_id, token: str | None, values: dict | None = None, **kwargs):
    """POST the page's form, form-encoded, as a browser does."""
    body = dict(FORM_VALUES if values is None else values)
    if token is not None:
        body[TOKEN] = token
    return await client.post(f"/f/{form_id}", data=body, **kwargs)


# --- rendering -----------------------------------------------------------------------------------


async def test_every_field_type_renders_its_input_type(client):
    form = await create_form(client)
    page, _ = await open_form(client, form["id"])
    types = {name: page.find(None, name=name) for name in FORM_VALUES}
    assert {name: (e.tag, e.attrs.get("type")) for name, e in types.items()} == {
        "name": ("input", "text"),
        "email": ("input", "email"),
        "phone": ("input", "tel"),
        "age": ("input", "number"),
        "agree": ("input", "checkbox"),
        "dob": ("input", "date"),
        "plan": ("select", None),
        "plaid_public_token": ("textarea", None),  # text without a short max_length: a text box
    }
    assert [o.attrs["value"] for o in page.find("select", name="plan").children] == ["", "basic", "pro"]
    assert types["name"].attrs["maxlength"] == "100"


async def test_each_input_has_its_label_and_required_inputs_are_required(client):
    form = await create_form(client)
    page, _ = await open_form(client, form["id"])
    for name in FORM_VALUES:
        element = page.find(None, name=name)
        label = page.find("label", for_=element.attrs["id"])
        assert name in label.text
        assert element.has("required") == (name in {"name", "email"})
        # A checkbox is never "required" to answer: unticked is an answer (see formdata.py).
        assert ("(optional)" in label.text) == (name not in {"name", "email", "agree"})
    hint = page.find(None, name="phone").attrs["aria-describedby"]
    assert "country code" in page.by_id(hint).text


async def test_the_page_never_shows_integration_config_or_secrets(client, engine):
    form = await create_form(client, integrations=[WEBHOOK])
    secret = form["webhook_secrets"]["crm-hook"]
    response = await client.get(f"/f/{form['id']}")
    assert response.status_code == 200
    for leak in ("hooks.example.com", secret, "whsec_", "crm-hook", "webhook"):
        assert leak not in response.text


async def test_names_and_labels_are_escaped(client):
    fields = [{"name": "x", "type": "text", "label": "<script>alert(1)</script>"}]
    form = await create_form(client, name="<b>Bold</b> & co", fields=fields)
    response = await client.get(f"/f/{form['id']}")
    assert "<script>alert(1)</script>" not in response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text
    assert "&lt;b&gt;Bold&lt;/b&gt; &amp; co" in response.text


async def test_pages_are_not_cached_and_allow_no_inline_script(client):
    form = await create_form(client)
    response = await client.get(f"/f/{form['id']}")
    assert response.headers["cache-control"] == "no-store"
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/" in cookie


async def test_the_script_and_stylesheet_are_served_by_the_app(client):
    form = await create_form(client)
    page, _ = await open_form(client, form["id"])
    for url in (page.find("script").attrs["src"], page.find("link", rel="stylesheet").attrs["href"]):
        response = await client.get(url)
        assert response.status_code == 200, url
        assert response.headers["content-type"].split(";")[0] in {"text/javascript", "application/javascript", "text/css"}


# --- submitting ----------------------------------------------------------------------------------


async def test_a_valid_post_saves_through_the_service_and_redirects_to_thanks(client, engine):
    form = await create_form(client, integrations=[WEBHOOK])
    _, token = await open_form(client, form["id"])
    response = await post_form(client, form["id"], token)
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith(f"/f/{form['id']}/thanks?ref=")
    reference = location.split("ref=")[1]

    saved = (await client.get(f"/api/submissions/{reference}", headers=ADMIN)).json()
    # The shared validation cleaned it: a number, a boolean, E.164, exactly as the JSON route would.
    assert saved["data"] == make_data(phone="+14155552671")
    assert [(op["integration_id"], op["status"]) for op in saved["operations"]] == [("crm-hook", "pending")]

    thanks = await client.get(location)
    assert thanks.status_code == 200
    assert "Thank you" in thanks.text and reference in thanks.text


@pytest.mark.parametrize("breakage", ["no token", "no cookie", "wrong signature", "garbage", "other form's token"])
async def test_a_post_without_a_valid_csrf_token_is_refused_and_saves_nothing(client, engine, breakage):
    form = await create_form(client)
    other = await create_form(client)
    _, token = await open_form(client, form["id"])
    _, other_token = await open_form(client, other["id"])
    if breakage == "no cookie":
        client.cookies.clear()
    token = {
        "no token": None,
        "no cookie": token,
        "wrong signature": token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"),
        "garbage": "not-a-token",
        "other form's token": other_token,
    }[breakage]
    response = await post_form(client, form["id"], token)
    assert response.status_code == 403
    assert "nothing was saved" in response.text
    assert await count_rows(engine) == (0, 0)


async def test_a_token_is_tied_to_the_browser_cookie_it_was_issued_with(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    client.cookies.clear()
    await open_form(client, form["id"])  # a new cookie: the old page's token no longer matches
    response = await post_form(client, form["id"], token)
    assert response.status_code == 403
    assert await count_rows(engine) == (0, 0)


async def test_errors_re_render_the_form_tied_to_their_fields_with_the_values_kept(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    values = FORM_VALUES | {"email": "ada@example", "phone": "123", "plan": "pro", "agree": "true"}
    response = await post_form(client, form["id"], token, values)
    assert response.status_code == 422
    page = Page(response.text)

    for name, message in [("email", "must be an email address"), ("phone", "must be a phone number")]:
        element = page.find("input", name=name)
        assert element.attrs["aria-invalid"] == "true"
        error_id = f"{element.attrs['id']}-error"
        assert error_id in element.attrs["aria-describedby"].split()
        assert message in page.by_id(error_id).text
        assert not page.by_id(error_id).has("hidden")
        link = page.find("a", href=f"#{element.attrs['id']}")
        assert message in link.text
    summary = page.by_id("error-summary")
    assert summary.attrs["role"] == "alert" and not summary.has("hidden")
    assert page.find("title").text.startswith("Error:")

    assert page.find("input", name="name").attrs["value"] == "Ada Lovelace"
    assert page.find("input", name="email").attrs["value"] == "ada@example"
    assert page.find("option", value="pro").has("selected")
    assert page.find("input", name="agree").has("checked")
    assert not page.find("input", name="name").has("aria-invalid")
    assert page.find("input", name=TOKEN).attrs["value"]  # a fresh token to send it again
    assert await count_rows(engine) == (0, 0)


async def test_the_page_and_the_json_api_give_the_same_verdict(client, engine):
    form = await create_form(client)
    bad = {"email": "ada@example", "age": "many"}
    api = await client.post(f"/api/forms/{form['id']}/submissions", json={"data": make_data(**bad)})
    assert api.status_code == 422
    _, token = await open_form(client, form["id"])
    page = Page((await post_form(client, form["id"], token, FORM_VALUES | bad)).text)
    for problem in api.json()["detail"]:
        field = problem["loc"][-1]
        assert page.by_id(f"field-{field}-error").text == problem["msg"]


async def test_a_missing_required_field_is_required(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    response = await post_form(client, form["id"], token, FORM_VALUES | {"name": "   "})
    assert response.status_code == 422
    assert "name is required" in Page(response.text).by_id("field-name-error").text


async def test_an_unchecked_optional_checkbox_is_false(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    values = {k: v for k, v in FORM_VALUES.items() if k != "agree"}
    response = await post_form(client, form["id"], token, values)
    assert response.status_code == 303
    reference = response.headers["location"].split("ref=")[1]
    saved = (await client.get(f"/api/submissions/{reference}", headers=ADMIN)).json()
    assert saved["data"]["agree"] is False


async def test_a_required_checkbox_must_be_checked(client, engine):
    fields = [{"name": "consent", "type": "boolean", "required": True, "label": "I agree"}]
    form = await create_form(client, fields=fields)
    page, token = await open_form(client, form["id"])
    assert page.find("input", name="consent").has("required")
    refused = await post_form(client, form["id"], token, {})
    assert refused.status_code == 422
    assert "I agree is required" in Page(refused.text).by_id("field-consent-error").text
    accepted = await post_form(client, form["id"], token, {"consent": "true"})
    assert accepted.status_code == 303


async def test_a_key_that_is_no_field_is_reported_in_the_summary(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    response = await post_form(client, form["id"], token, FORM_VALUES | {"admin": "yes"})
    assert response.status_code == 422
    assert "is not a field of this form" in Page(response.text).by_id("error-summary").text
    assert await count_rows(engine) == (0, 0)


async def test_the_same_page_posted_twice_saves_once(client, engine):
    form = await create_form(client, integrations=[WEBHOOK])
    _, token = await open_form(client, form["id"])
    first = await post_form(client, form["id"], token)
    second = await post_form(client, form["id"], token)
    assert first.status_code == second.status_code == 303
    assert first.headers["location"] == second.headers["location"]
    assert await count_rows(engine) == (1, 1)


async def test_a_body_that_is_not_form_encoded_is_refused(client, engine):
    form = await create_form(client)
    await open_form(client, form["id"])
    response = await client.post(f"/f/{form['id']}", json={"data": make_data()})
    assert response.status_code == 415
    assert await count_rows(engine) == (0, 0)


# --- closed and unknown forms --------------------------------------------------------------------


async def test_a_closed_form_shows_its_message_and_refuses_a_post(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    assert (await client.post(f"/api/forms/{form['id']}/close", headers=ADMIN)).status_code == 200

    shown = await client.get(f"/f/{form['id']}")
    assert shown.status_code == 200
    assert "This form is closed" in shown.text
    assert Page(shown.text).find_all("form") == []

    posted = await post_form(client, form["id"], token)
    assert posted.status_code == 409
    assert "This form is closed" in posted.text
    assert await count_rows(engine) == (0, 0)


@pytest.mark.parametrize("path", ["/f/{id}", "/f/{id}/thanks", "/f/not-a-uuid", "/f/not-a-uuid/thanks"])
async def test_an_unknown_form_is_a_404_page(client, path):
    response = await client.get(path.format(id=uuid.uuid4()))
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "Form not found" in response.text


async def test_a_post_to_an_unknown_form_is_a_404_page(client, engine):
    form = await create_form(client)
    _, token = await open_form(client, form["id"])
    response = await post_form(client, "not-a-uuid", token)
    assert response.status_code == 404


async def test_the_thanks_page_shows_only_a_reference_that_is_an_id(client):
    form = await create_form(client)
    response = await client.get(f"/f/{form['id']}/thanks", params={"ref": "<script>x</script>"})
    assert response.status_code == 200
    assert "<script>x" not in response.text and "&lt;script&gt;" not in response.text
    assert Page(response.text).find("p", class_="reference").has("hidden")

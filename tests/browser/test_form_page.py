"""The hosted form page in a real browser: with JavaScript, without it, closed, and on a phone."""

from collections.abc import AsyncIterator

import httpx
import pytest
from playwright.async_api import expect

from tests.api.conftest import make_settings
from tests.api.factories import ADMIN, count_rows

FIELDS = [
    {"name": "name", "type": "text", "label": "Full name", "required": True, "max_length": 100},
    {"name": "email", "type": "email", "label": "Email", "required": True},
    {"name": "phone", "type": "phone", "label": "Phone"},
    {"name": "age", "type": "number", "label": "Age"},
    {"name": "agree", "type": "boolean", "label": "Contact me about my application"},
    {"name": "dob", "type": "date", "label": "Date of birth"},
    {"name": "plan", "type": "select", "label": "Plan", "options": ["basic", "pro"]},
]
WEBHOOK = {"id": "crm-hook", "type": "webhook", "url": "https://hooks.example.com/intake"}
EXPECTED_DATA = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "phone": "+14155552671",
    "age": 36,
    "agree": True,
    "dob": "1815-12-10",
    "plan": "pro",
}


@pytest.fixture
async def site(database_url, engine, live_server) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """The live server's base URL, and an admin client for its API."""
    base = live_server(make_settings(database_url))
    async with httpx.AsyncClient(base_url=base, headers=ADMIN, timeout=10) as admin:
        yield base, admin


async def new_form(admin: httpx.AsyncClient, **overrides) -> str:
    body = {"name": "Scholarship application", "fields": FIELDS, "integrations": [WEBHOOK]} | overrides
    response = await admin.post("/api/forms", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def fill_in(page, *, email: str, phone: str = "+1 415 555 2671") -> None:
    await page.get_by_label("Full name").fill("Ada Lovelace")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Phone").fill(phone)
    await page.get_by_label("Age").fill("36")
    await page.get_by_label("Contact me about my application").check()
    await page.get_by_label("Date of birth").fill("1815-12-10")
    await page.get_by_label("Plan").select_option("pro")


async def assert_saved(admin: httpx.AsyncClient, reference: str) -> None:
    """The submission, seen through the admin API, with the operation its webhook enqueued."""
    response = await admin.get(f"/api/submissions/{reference}")
    assert response.status_code == 200, response.text
    submission = response.json()
    assert submission["data"] == EXPECTED_DATA
    assert [(op["integration_id"], op["operation_type"], op["status"]) for op in submission["operations"]] == [
        ("crm-hook", "webhook", "pending")
    ]


async def test_with_javascript_errors_show_inline_and_the_form_is_sent_without_a_reload(site, page, engine):
    base, admin = site
    form_id = await new_form(admin)
    await page.goto(f"{base}/f/{form_id}")
    await page.evaluate("window.sameDocument = true")
    email, email_error = page.get_by_label("Email"), page.locator("#field-email-error")

    await fill_in(page, email="not-an-email")
    await email.press("Tab")  # leaving the field checks it
    await expect(email_error).to_be_visible()
    await expect(email).to_have_attribute("aria-invalid", "true")
    assert "field-email-error" in (await email.get_attribute("aria-describedby")).split()

    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#error-summary")).to_be_visible()
    await expect(page.locator("#error-summary")).to_contain_text("Email")
    assert await count_rows(engine) == (0, 0)

    # The browser accepts this address; the server, which decides, does not: its 422 is shown inline.
    await email.fill("ada@example")
    await page.get_by_role("button", name="Send").click()
    await expect(email_error).to_have_text("Email must be an email address, like name@example.com")
    await expect(email).to_have_attribute("aria-invalid", "true")
    assert await count_rows(engine) == (0, 0)

    await email.fill("ada@example.com")
    await expect(email_error).to_be_hidden()
    await page.get_by_role("button", name="Send").click()
    await expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    assert await page.evaluate("window.sameDocument") is True  # no page load happened
    assert f"/f/{form_id}/thanks?ref=" in page.url
    reference = (await page.locator("[data-reference-value]").text_content()).strip()
    assert page.url.endswith(reference)
    await assert_saved(admin, reference)


async def test_without_javascript_the_server_shows_the_errors_then_the_thanks(site, browser, engine):
    base, admin = site
    form_id = await new_form(admin)
    context = await browser.new_context(java_script_enabled=False)
    try:
        page = await context.new_page()
        await page.goto(f"{base}/f/{form_id}")
        await fill_in(page, email="ada@example", phone="123")
        async with page.expect_navigation() as navigation:
            await page.get_by_role("button", name="Send").click()
        assert (await navigation.value).status == 422

        await expect(page.locator("#error-summary")).to_be_visible()
        await expect(page.locator("#field-email-error")).to_have_text("Email must be an email address, like name@example.com")
        await expect(page.locator("#field-phone-error")).to_contain_text("Phone must be a phone number")
        await expect(page.get_by_label("Email")).to_have_attribute("aria-invalid", "true")
        await expect(page.get_by_label("Full name")).to_have_value("Ada Lovelace")  # what was typed is kept
        await expect(page.get_by_label("Plan")).to_have_value("pro")
        await expect(page.get_by_label("Contact me about my application")).to_be_checked()
        assert await count_rows(engine) == (0, 0)

        await page.get_by_label("Email").fill("ada@example.com")
        await page.get_by_label("Phone").fill("+1 415 555 2671")
        async with page.expect_navigation(url=f"**/f/{form_id}/thanks?ref=*") as navigation:
            await page.get_by_role("button", name="Send").click()
        assert (await navigation.value).status == 200
        await expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
        await assert_saved(admin, page.url.split("ref=")[1])
    finally:
        await context.close()


async def test_a_closed_form_shows_its_message(site, page, engine):
    base, admin = site
    form_id = await new_form(admin)
    assert (await admin.post(f"/api/forms/{form_id}/close")).status_code == 200
    await page.goto(f"{base}/f/{form_id}")
    await expect(page.get_by_text("This form is closed.")).to_be_visible()
    assert await page.locator("form").count() == 0


async def test_a_form_closed_while_it_is_filled_in_says_so_when_sent(site, page, engine):
    base, admin = site
    form_id = await new_form(admin)
    await page.goto(f"{base}/f/{form_id}")
    await fill_in(page, email="ada@example.com")
    assert (await admin.post(f"/api/forms/{form_id}/close")).status_code == 200
    await page.get_by_role("button", name="Send").click()
    await expect(page.get_by_text("This form is closed.")).to_be_visible()
    assert await page.locator("form").count() == 0
    assert await count_rows(engine) == (0, 0)


async def test_the_form_fits_a_phone_screen(site, browser, tmp_path):
    base, admin = site
    form_id = await new_form(admin)
    context = await browser.new_context(viewport={"width": 360, "height": 740}, device_scale_factor=2, is_mobile=True)
    try:
        page = await context.new_page()
        await page.goto(f"{base}/f/{form_id}")
        await page.get_by_role("button", name="Send").click()  # empty: the errors show too
        await expect(page.locator("#error-summary")).to_be_visible()
        width = await page.evaluate("document.documentElement.clientWidth")
        assert await page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scrolling
        for control in await page.locator("input:not([type=hidden]):not([type=checkbox]), select, button").all():
            box = await control.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width
            assert box["height"] >= 40  # a finger can hit it
        await page.screenshot(path=str(tmp_path / "form-phone.png"), full_page=True)
        assert (tmp_path / "form-phone.png").stat().st_size > 0
    finally:
        await context.close()

"""The admin dashboard in Debian's Chromium against a live server: sign in with the token, see the
dead operations with their last error and history, retry, discard and bulk-retry them; at a
desktop width and at a phone's."""

import pytest
from playwright.async_api import expect

from app.admin.audit import fingerprint
from app.queue.operation import Status
from tests.api.conftest import ADMIN_TOKEN, make_settings
from tests.api.queue_rows import enqueue, get, make_dead

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}


async def sign_in(page, base: str, token: str = ADMIN_TOKEN) -> None:
    await page.goto(f"{base}/admin")
    await page.fill("#token", token)
    await page.click("#sign-in-form button[type=submit]")


async def dead_ids(page) -> list[str]:
    return await page.eval_on_selector_all("#dead-list .dead-item", "items => items.map(i => i.dataset.id)")


async def wait_for_dead(page, count: int) -> None:
    # Locator assertions, not wait_for_function: the page's CSP forbids the eval that one needs.
    await expect(page.locator("#dead-list .dead-item")).to_have_count(count)


async def test_sign_in_see_retry_discard_and_bulk_retry(database_url, engine, live_server, page, tmp_path):
    [webhook_a] = await make_dead(engine, error="webhook receiver at a.example.com answered 400 Bad Request")
    [webhook_b] = await make_dead(engine, error="webhook receiver at b.example.com answered 410 Gone")
    emails = await make_dead(engine, 2, operation_type="email", error="Resend answered 422: invalid recipient")
    await enqueue(engine, 3)
    base = live_server(make_settings(database_url))
    page.on("dialog", lambda dialog: dialog.accept())

    await page.goto(f"{base}/admin")
    assert await page.is_visible("#sign-in") and not await page.is_visible("#dashboard")
    await sign_in(page, base, "not-the-token")
    await page.wait_for_selector("#message.error")
    assert "refused" in await page.text_content("#message")
    assert await page.evaluate("sessionStorage.length") == 0

    await sign_in(page, base)
    await page.wait_for_selector("#dashboard:not([hidden])")
    await wait_for_dead(page, 4)
    assert await page.evaluate(f"sessionStorage.getItem('intake.adminToken') === {ADMIN_TOKEN!r}")
    assert await page.evaluate("localStorage.length") == 0 and await page.context.cookies() == []

    # The queue: counts per type and status.
    assert await page.text_content("#queue-table tr[data-type=webhook] td[data-status=dead]") == "2"
    assert await page.text_content("#queue-table tr[data-type=webhook] td[data-status=pending]") == "3"
    assert await page.text_content("#queue-table tr[data-type=email] td[data-status=dead]") == "2"
    assert "4 dead" in await page.text_content("#dlq-stats")

    # Each dead operation: its last error, and its history when opened.
    item = page.locator(f".dead-item[data-id='{webhook_b}']")
    assert "410 Gone" in await item.locator(".last-error").text_content()
    await item.locator(".history summary").click()
    attempt = await item.locator(".attempts li").first.text_content()
    assert "attempt 1" in attempt and "HTTP 400" in attempt and "12 ms" in attempt and "410 Gone" in attempt
    await page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

    # Retry one: it leaves the list and runs again.
    await item.locator("button.retry").click()
    await wait_for_dead(page, 3)
    assert str(webhook_b) not in await dead_ids(page)
    assert (await get(engine, webhook_b)).status is Status.PENDING
    await expect(page.locator("#dlq-stats")).to_contain_text("1 retrying")

    # Discard one: it leaves the list for good.
    await page.locator(f".dead-item[data-id='{webhook_a}'] button.discard").click()
    await wait_for_dead(page, 2)
    assert (await get(engine, webhook_a)).status is Status.DISCARDED

    # Bulk retry by type.
    await page.select_option("#dlq-type", "email")
    assert await page.text_content("#bulk-retry") == "Retry all dead email"
    await page.click("#bulk-retry")
    await page.wait_for_selector("#dlq-empty:not([hidden])")
    assert "Retried 2 dead operations" in await page.text_content("#message")
    assert {(await get(engine, i)).status for i in emails} == {Status.PENDING}
    await page.screenshot(path=str(tmp_path / "dashboard-after.png"), full_page=True)
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000

    # Every action was audited under the token's fingerprint.
    import httpx

    audit = httpx.get(f"{base}/api/audit", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["items"]
    assert [(e["action"], e["count"]) for e in audit] == [("retry", 2), ("discard", 1), ("retry", 1)]
    assert {e["actor"] for e in audit} == {f"admin:{fingerprint(ADMIN_TOKEN)}"}

    # Signing out forgets the token.
    await page.click("#sign-out")
    assert await page.is_visible("#sign-in")
    assert await page.evaluate("sessionStorage.length") == 0


async def test_the_token_lives_in_the_tab_only(database_url, engine, live_server, browser):
    await make_dead(engine)
    base = live_server(make_settings(database_url))
    first = await browser.new_context()
    page = await first.new_page()
    await sign_in(page, base)
    await wait_for_dead(page, 1)
    await page.reload()
    await wait_for_dead(page, 1)  # a reload keeps the session
    other = await (await browser.new_context()).new_page()
    await other.goto(f"{base}/admin")
    assert await other.is_visible("#sign-in") and not await other.is_visible("#dashboard")
    await first.close()
    await other.context.close()


async def test_dead_operation_text_is_shown_as_text_never_as_html(database_url, engine, live_server, page):
    await make_dead(engine, error='<img src=x onerror="document.title=\'pwned\'"> answered 500')
    base = live_server(make_settings(database_url))
    await sign_in(page, base)
    await wait_for_dead(page, 1)
    assert "<img src=x" in await page.text_content(".dead-item .last-error")
    assert await page.locator(".dead-item img").count() == 0
    assert await page.title() == "Intake admin"


@pytest.mark.parametrize("width", [390, 320])
async def test_at_a_phone_width_an_admin_can_retry_without_sideways_scrolling(
    database_url, engine, live_server, browser, tmp_path, width
):
    await make_dead(engine, operation_type="notification", error="email failed: Resend answered 422: " + "x" * 300)
    [dead] = await make_dead(engine, error="webhook receiver at hooks.example.com answered 400 Bad Request")
    base = live_server(make_settings(database_url))
    context = await browser.new_context(**(PHONE | {"viewport": {"width": width, "height": 844}}))
    page = await context.new_page()
    try:
        await sign_in(page, base)
        await wait_for_dead(page, 2)
        page_width = await page.evaluate("document.documentElement.scrollWidth")
        assert page_width <= width, f"the page is {page_width}px wide on a {width}px screen"
        dead_count = await page.locator("#queue-table tr[data-type=webhook] td[data-status=dead]").bounding_box()
        assert dead_count["x"] + dead_count["width"] <= width  # the queue's dead count is in view
        button = page.locator(f".dead-item[data-id='{dead}'] button.retry")
        box = await button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width and box["height"] >= 36  # reachable, big enough
        await page.screenshot(path=str(tmp_path / f"dashboard-{width}.png"), full_page=True)
        await button.tap()
        await wait_for_dead(page, 1)
        assert (await get(engine, dead)).status is Status.PENDING
    finally:
        await context.close()
    assert (tmp_path / f"dashboard-{width}.png").stat().st_size > 5_000

"""The browser machinery itself: Chromium opens a page the live server serves."""

from tests.api.conftest import make_settings


async def test_chromium_reads_a_page_from_the_live_server(database_url, engine, live_server, page, tmp_path):
    base = live_server(make_settings(database_url))
    response = await page.goto(f"{base}/healthz")
    assert response.status == 200
    assert '"ok"' in await page.content()
    await page.screenshot(path=str(tmp_path / "healthz.png"))
    assert (tmp_path / "healthz.png").stat().st_size > 0

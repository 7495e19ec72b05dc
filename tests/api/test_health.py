from tests.api.conftest import make_settings, serve


async def test_healthz_answers_without_the_database(tmp_path):
    async with serve(make_settings(f"sqlite:///{tmp_path}/missing/dir/x.db")) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_ready_on_a_migrated_database(client):
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["status"] == "ready"


async def test_readyz_says_to_migrate_an_unmigrated_database(tmp_path):
    async with serve(make_settings(f"sqlite:///{tmp_path}/empty.db")) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert "run `intake migrate`" in response.json()["detail"]


async def test_readyz_reports_an_unreachable_database():
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    async with serve(make_settings("postgresql://postgres@127.0.0.1:1/nothing")) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["detail"].startswith("database unreachable")

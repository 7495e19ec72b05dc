"""GET /metrics: valid Prometheus text whose counters move as operations run, per app instance."""

from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import make_settings, serve
from tests.api.factories import ADMIN, submit
from tests.e2e.test_processing import make_due, process, settings_for, webhook_form  # noqa: F401 - fixture


async def scrape(client) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics by (name, sorted labels), parsed by prometheus_client's own parser."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def parse(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_parse_and_move_as_operations_run(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(500, times=1)
    async with serve(settings_for()) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        before = await scrape(client)
        assert value(before, "intake_database_up") == 1
        assert value(before, "intake_queue_depth", type="webhook", status="pending") == 0

        await submit(client, form["id"])
        queued = await scrape(client)
        assert value(queued, "intake_submissions_received_total") == 1
        assert value(queued, "intake_queue_depth", type="webhook", status="pending") == 1
        assert value(queued, "intake_queue_oldest_due_age_seconds") >= 0

        await process(client)  # the 500: failed, to be retried
        failed = await scrape(client)
        assert value(failed, "intake_operations_processed_total", type="webhook", outcome="failed") == 1
        assert value(failed, "intake_queue_depth", type="webhook", status="failed") == 1
        assert value(failed, "intake_queue_depth", type="webhook", status="pending") == 0

        await make_due(engine)
        await process(client)
        done = await scrape(client)
    assert value(done, "intake_operations_processed_total", type="webhook", outcome="completed") == 1
    assert value(done, "intake_operation_duration_seconds_count", type="webhook") == 2
    assert value(done, "intake_operation_duration_seconds_bucket", type="webhook", le="+Inf") == 2
    assert value(done, "intake_claim_batch_size_count") == 2
    assert value(done, "intake_claim_batch_size_sum") == 2
    assert value(done, "intake_queue_depth", type="webhook", status="failed") == 0


async def test_each_app_counts_for_itself(settings_for, webhook_receiver):
    async with serve(settings_for()) as first:
        form, _ = await webhook_form(first, webhook_receiver)
        await submit(first, form["id"])
        assert value(await scrape(first), "intake_submissions_received_total") == 1
        async with serve(settings_for()) as second:
            assert value(await scrape(second), "intake_submissions_received_total") == 0


async def test_metrics_need_no_token_and_name_no_operation(settings_for, webhook_receiver):
    webhook_receiver.fail(400, times=1)
    async with serve(settings_for()) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        await process(client)
        [dead] = (await client.get("/api/dlq", headers=ADMIN)).json()["items"]
        text = (await client.get("/metrics")).text
    assert value(parse(text), "intake_queue_depth", type="webhook", status="dead") == 1
    for private in (dead["id"], submission_id, form["id"], "ada@example.com"):
        assert private not in text



async def test_without_the_database_the_counters_are_still_served(tmp_path):
    settings = make_settings(f"sqlite:///{tmp_path}/no/such/folder/intake.db")
    async with serve(settings) as client:
        samples = await scrape(client)
    assert value(samples, "intake_database_up") == 0
    assert ("intake_submissions_received_total", ()) in samples
    assert not any(name == "intake_queue_depth" for name, _ in samples)

"""Fake providers: real HTTP servers on 127.0.0.1 that check requests like the real APIs and record them.

Use the fixtures of tests/fakes/fixtures.py (available to every test): `webhook_receiver`,
`fake_airtable`, `fake_resend`, `fake_twilio`, `fake_plaid`, or `fake_providers` for all of
them with `.settings` (Settings keyword arguments pointing Intake at them). Every fake records
`requests` (method, path, query, headers, body) and can be told to misbehave: `fail(status,
times=, retry_after=, body=, path=)`, `respond(status, body=, headers=, times=)`,
`delay(seconds)`, `drip(body, interval=)`; `wait_for(count)` awaits deliveries from another
process.
"""

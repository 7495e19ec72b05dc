"""The credentials the fake providers accept, and the settings that point Intake at the fakes."""

AIRTABLE_API_KEY = "patFAKEairtable.0123456789abcdef"
RESEND_API_KEY = "re_fake_0123456789abcdef"
EMAIL_FROM = "Intake Tests <intake@example.test>"
TWILIO_ACCOUNT_SID = "AC" + "0123456789abcdef" * 2
TWILIO_AUTH_TOKEN = "fake-twilio-auth-token-0123456789"
TWILIO_FROM_NUMBER = "+15005550006"
PLAID_CLIENT_ID = "fake-plaid-client-id"
PLAID_SECRET = "fake-plaid-secret-0123456789"

#: Every credential above that is a secret: tests check none of them leaks.
SECRETS = (AIRTABLE_API_KEY, RESEND_API_KEY, TWILIO_AUTH_TOKEN, PLAID_SECRET)

"""Which handler runs which operation type: an explicit table, one line per integration."""

from app.integrations import airtable, email, notification, plaid, sms, webhook
from app.integrations.base import Handler
from app.queue.operation import OperationType

HANDLERS: dict[str, Handler] = {
    OperationType.WEBHOOK.value: webhook.handle,
    OperationType.AIRTABLE_SYNC.value: airtable.handle,
    OperationType.EMAIL.value: email.handle,
    OperationType.SMS.value: sms.handle,
    OperationType.PLAID_ENRICHMENT.value: plaid.handle,
    OperationType.NOTIFICATION.value: notification.handle,
}

import inspect

from app.integrations.registry import HANDLERS
from app.queue.operation import OperationType


def test_every_operation_type_has_exactly_one_handler():
    assert set(HANDLERS) == {t.value for t in OperationType}


def test_handlers_are_coroutine_functions_named_handle():
    for handler in HANDLERS.values():
        assert inspect.iscoroutinefunction(handler)
        assert handler.__name__ == "handle"

"""Submission data against a form's fields: coercion, rejection, and every problem reported."""

import pytest

from app.forms.schema import FormField
from app.submissions.validation import InvalidSubmission, validate_submission


def field(name: str, type: str = "text", **options) -> FormField:
    return FormField(name=name, type=type, **options)


def problems(fields, data) -> dict[str, str]:
    with pytest.raises(InvalidSubmission) as caught:
        validate_submission(fields, data)
    return {p.field: p.message for p in caught.value.problems}


def test_valid_data_comes_back_cleaned():
    fields = [
        field("name", required=True),
        field("email", "email"),
        field("phone", "phone"),
        field("age", "number"),
        field("agree", "boolean"),
        field("dob", "date"),
        field("plan", "select", options=["basic", "pro"]),
    ]
    data = {
        "name": "  Ada  ",
        "email": "Ada@Example.COM",
        "phone": "+44 20 7946 0958",
        "age": "42",
        "agree": "on",
        "dob": "1990-02-28",
        "plan": "pro",
    }
    assert validate_submission(fields, data) == {
        "name": "Ada",
        "email": "Ada@example.com",
        "phone": "+442079460958",
        "age": 42,
        "agree": True,
        "dob": "1990-02-28",
        "plan": "pro",
    }


def test_every_problem_is_reported_at_once():
    fields = [field("name", required=True), field("email", "email", required=True), field("age", "number")]
    found = problems(fields, {"email": "not-an-address", "age": "old", "nickname": "x"})
    assert set(found) == {"name", "email", "age", "nickname"}
    assert found["name"] == "name is required"
    assert found["nickname"] == "is not a field of this form"


def test_messages_use_the_label():
    found = problems([field("dob", "date", label="Date of birth", required=True)], {"dob": "31/12/1990"})
    assert found["dob"] == "Date of birth must be a date written as YYYY-MM-DD"


@pytest.mark.parametrize("blank", [None, "", "   "])
def test_a_blank_value_is_missing(blank):
    assert problems([field("name", required=True)], {"name": blank}) == {"name": "name is required"}
    assert validate_submission([field("name")], {"name": blank}) == {}


def test_false_is_a_present_boolean():
    assert validate_submission([field("agree", "boolean", required=True)], {"agree": False}) == {"agree": False}


@pytest.mark.parametrize(
    ("type", "options", "value"),
    [
        ("text", None, 12),
        ("email", None, "a@b"),
        ("email", None, "two@@example.com"),
        ("phone", None, "555-0123"),  # no country code
        ("phone", None, "+1 555"),  # too short to be a number anywhere
        ("number", None, True),
        ("number", None, "NaN"),
        ("number", None, "twelve"),
        ("boolean", None, "maybe"),
        ("boolean", None, 2),
        ("date", None, "2023-02-30"),
        ("select", ["basic", "pro"], "enterprise"),
    ],
)
def test_values_of_the_wrong_type_are_rejected(type, options, value):
    assert set(problems([field("x", type, options=options)], {"x": value})) == {"x"}


@pytest.mark.parametrize(
    ("type", "value", "cleaned"),
    [
        ("number", 3.5, 3.5),
        ("number", "-2.25", -2.25),
        ("number", 7, 7),
        ("boolean", "false", False),
        ("boolean", 1, True),
        ("phone", "+1 (415) 555-2671", "+14155552671"),
    ],
)
def test_values_are_coerced_to_their_type(type, value, cleaned):
    assert validate_submission([field("x", type)], {"x": value}) == {"x": cleaned}


def test_max_length_counts_characters_after_trimming():
    fields = [field("note", max_length=5)]
    assert validate_submission(fields, {"note": " hello "}) == {"note": "hello"}
    assert problems(fields, {"note": "hello!"}) == {"note": "note must be at most 5 characters (it has 6)"}

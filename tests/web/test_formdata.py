"""Reading a form-encoded POST as submission data: what an HTML form means, validated elsewhere."""

import pytest

from app.forms.schema import FormField
from app.submissions.validation import InvalidSubmission, validate_submission
from app.web.formdata import MAX_PAIRS, parse_body, raw_values, submission_data

FIELDS = [
    FormField(name="name", type="text", required=True),
    FormField(name="age", type="number"),
    FormField(name="news", type="boolean"),
    FormField(name="consent", type="boolean", required=True),
]


def read(body: bytes) -> dict:
    return submission_data(FIELDS, raw_values(parse_body(body), skip={"csrf-token"}))


def test_values_are_passed_as_text_for_the_shared_validation_to_clean():
    data = read(b"name=Ada+L%C3%B6velace&age=36&news=true&consent=true&csrf-token=t")
    assert data == {"name": "Ada Lövelace", "age": "36", "news": "true", "consent": "true"}
    assert validate_submission(FIELDS, data) == {"name": "Ada Lövelace", "age": 36, "news": True, "consent": True}


def test_empty_inputs_are_missing():
    assert read(b"name=Ada&age=&consent=true") == {"name": "Ada", "news": False, "consent": "true"}
    assert read(b"name=%20%20&consent=true") == {"news": False, "consent": "true"}


def test_an_unchecked_box_is_false_when_optional_and_missing_when_required():
    data = read(b"name=Ada")
    assert data == {"name": "Ada", "news": False}
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(FIELDS, data)
    assert [(p.field, p.message) for p in refused.value.problems] == [("consent", "consent is required")]


def test_a_field_sent_twice_is_refused_by_the_validation():
    data = read(b"name=Ada&name=Bob&consent=true")
    assert data["name"] == ["Ada", "Bob"]
    with pytest.raises(InvalidSubmission, match="name must be text"):
        validate_submission(FIELDS, data)


def test_keys_that_are_no_field_reach_the_validation_which_refuses_them():
    data = read(b"name=Ada&consent=true&role=admin")
    with pytest.raises(InvalidSubmission, match="role: is not a field of this form"):
        validate_submission(FIELDS, data)


def test_the_csrf_token_is_never_part_of_the_data():
    assert "csrf-token" not in read(b"name=Ada&consent=true&csrf-token=abc")


def test_too_many_pairs_are_refused():
    with pytest.raises(ValueError):
        parse_body(b"&".join(b"k%d=v" % i for i in range(MAX_PAIRS + 1)))


def test_bytes_that_are_not_utf8_do_not_raise():
    assert read(b"name=%FF%FEAda&consent=true")["name"].endswith("Ada")

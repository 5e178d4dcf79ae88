"""``string_argument``: the one home of "this tool takes one non-empty string" (the MCP agent tool's
``question``, the retrieval tool's ``query``): bad arguments name the key and what to send."""

import pytest

from advisorchain.tools import InvalidToolArgumentsError
from advisorchain.tools.schema import string_argument


def test_the_string_is_returned_as_sent() -> None:
    assert string_argument('{"query": " vacuum "}', "search", "query") == " vacuum "


@pytest.mark.parametrize("arguments", ["", "{}", '{"query": ""}', '{"query": "  "}', '{"query": 3}', "null"])
def test_a_missing_or_blank_string_names_the_key_and_what_to_send(arguments: str) -> None:
    with pytest.raises(InvalidToolArgumentsError) as caught:
        string_argument(arguments, "search", "query")
    assert str(caught.value) == (
        f"tool 'search' needs a non-empty string 'query', got {arguments!r}; send {{\"query\": \"...\"}}"
    )


@pytest.mark.parametrize(("arguments", "said"), [("{oops", "are not valid JSON"), ("[1]", "must be a JSON object")])
def test_arguments_that_are_not_a_json_object_are_refused_as_every_tool_refuses_them(arguments: str, said: str) -> None:
    with pytest.raises(InvalidToolArgumentsError, match=f"the arguments of tool 'search' {said}"):
        string_argument(arguments, "search", "query")

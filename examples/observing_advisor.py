"""An observing advisor inside the tool loop sees every iteration; one outside sees one call.

Run: python examples/observing_advisor.py
"""

from advisorchain import (
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientResponse,
    ToolCall,
    ToolCallingAdvisor,
    tool,
)
from advisorchain.testing import ScriptedChatModel


class ToolCallObserver(BaseAdvisor):
    """Placed after the ToolCallingAdvisor, so it runs on every loop iteration."""

    order = ToolCallingAdvisor.DEFAULT_ORDER + 1

    def __init__(self) -> None:
        self.iterations: list[list[str]] = []

    def after(self, response: ChatClientResponse, chain: object) -> ChatClientResponse:
        calls = response.chat_response.result.output.tool_calls if response.chat_response else ()
        self.iterations.append([c.name for c in calls])
        return response


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: a recursive advisor"


observer = ToolCallObserver()
model = ScriptedChatModel([AssistantMessage(None, [ToolCall("1", "lookup", '{"term": "loop"}')]), "Done."])
answer = ChatClient(model, default_advisors=[observer]).prompt("Explain").tools(lookup).call().content()
print(answer, observer.iterations)  # Done. [['lookup'], []]

"""The tool loop on a scripted model: two parallel tool calls, then an answer.

Run: python examples/tool_loop.py   (swap the model for OpenAIChatModel("gpt-4o-mini") to go live)
"""

from advisorchain import AssistantMessage, ChatClient, ToolCall, tool
from advisorchain.testing import ScriptedChatModel


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return {"Paris": "sunny, 21°C", "Rome": "cloudy, 18°C"}.get(city, "unknown")


model = ScriptedChatModel(
    [
        AssistantMessage(
            "Let me check.",
            [
                ToolCall("c1", "get_weather", '{"city": "Paris"}'),
                ToolCall("c2", "get_weather", '{"city": "Rome"}'),
            ],
        ),
        "Paris is sunny (21°C); Rome is cloudy (18°C).",
    ]
)
client = ChatClient(model)
print(client.prompt("Weather in Paris and Rome?").tools(get_weather).call().content())
for response in model.prompts[1].instructions[-1].responses:  # type: ignore[union-attr]
    print(f"  {response.name}({response.id}) -> {response.response_data}")

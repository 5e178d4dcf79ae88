"""Several agents in one conversation: triage hands a customer to billing or refunds.

The model is scripted (a function of the prompt it is sent), so this runs offline; swap it for
OpenAIChatModel("gpt-4o-mini") to go live. Memory keeps each conversation, and the conversation
stays with the agent it was handed to on the next turn: nothing for the caller to track.

Run: python examples/customer_service.py
"""

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    Prompt,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from advisorchain.agents import Agent
from advisorchain.testing import FunctionChatModel

INVOICES = {"1042": "49.00 EUR, paid on 3 March", "1043": "12.50 EUR, due on 1 April"}


@tool
def lookup_invoice(invoice: str) -> str:
    """The amount and state of an invoice."""
    return INVOICES.get(invoice, "no such invoice")


@tool
def refund_invoice(invoice: str) -> str:
    """Refund an invoice to the card it was paid with."""
    return f"refund of invoice {invoice} started"


billing = Agent(
    "billing",
    instructions="You are billing. Look invoices up before answering.",
    description="Invoices, amounts and payments",
    tools=[lookup_invoice],
)
refunds = Agent(
    "refunds",
    instructions="You are refunds. Start refunds the customer asks for.",
    description="Money back for an invoice",
    tools=[refund_invoice],
)
triage = Agent(
    "triage",
    instructions="You are triage. Hand the customer to the right specialist.",
    handoffs=[billing, refunds],
)


def scripted(prompt: Prompt) -> AssistantMessage:
    """What a model would answer: each agent knows its job from its system message."""
    system = prompt.instructions[0].text  # type: ignore[attr-defined]
    last = prompt.instructions[-1]
    question = next(m.text for m in reversed(prompt.instructions) if isinstance(m, UserMessage))
    invoice = next((w for w in question.replace("?", "").split() if w.isdigit()), "1042")
    if system.startswith("You are triage"):
        target = "refunds" if "refund" in question else "billing"
        return AssistantMessage(None, [ToolCall("h1", f"transfer_to_{target}", "{}")])
    if isinstance(last, ToolResponseMessage) and not last.responses[0].name.startswith("transfer_to_"):
        return AssistantMessage(f"Invoice {invoice}: {last.responses[0].response_data}.")
    tool_name = "refund_invoice" if system.startswith("You are refunds") else "lookup_invoice"
    call = ToolCall(f"t{len(prompt.instructions)}", tool_name, f'{{"invoice": "{invoice}"}}')
    return AssistantMessage(None, [call])


memory = MessageWindowChatMemory()
client = ChatClient(
    FunctionChatModel(scripted), default_advisors=[MessageChatMemoryAdvisor(memory)], default_agent=triage
)

for conversation, question in [
    ("ada", "How much was invoice 1042?"),
    ("ada", "And invoice 1043?"),  # stays with billing: no triage round this time
    ("bob", "Please refund invoice 1043"),
]:
    spec = client.prompt(question).param(ChatMemory.CONVERSATION_ID, conversation)
    response = spec.call().chat_client_response()
    agent = response.context[AdvisorParams.ACTIVE_AGENT]
    handoffs = " ".join(f"({a} -> {b})" for a, b in response.context[AdvisorParams.HANDOFFS])
    print(f"{conversation}: [{agent}] {response.chat_response.text} {handoffs}".rstrip())  # type: ignore[union-attr]

"""Structured output with validation and retry.

Run: python examples/structured_output.py
"""

from pydantic import BaseModel

from advisorchain import ChatClient
from advisorchain.testing import ScriptedChatModel


class City(BaseModel):
    name: str
    population: int


model = ScriptedChatModel(['{"name": "Paris"}', '```json\n{"name": "Paris", "population": 2100000}\n```'])
city = ChatClient(model).prompt("Describe Paris").call().entity(City, schema_validation=True)
print(city)  # name='Paris' population=2100000 (after one retry)
print(model.prompts[1].instructions[-1].text.splitlines()[0:1])  # type: ignore[union-attr]

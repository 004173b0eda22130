"""The fixed 10-step task shared by every implementation: the same tools, the same scripted replies.

Nine tool calls (prices looked up, multiplied, added) then a final answer; the answer is 43. The tools are plain
Python functions with type hints and Google-style docstrings, which every framework turns into a tool schema its
own way (ThinkFlow through a ``kind: python`` tool spec whose entrypoint is ``task:<function>``).
Standard library only (imported in both venvs).
"""

from __future__ import annotations

TASK = ("An order has 4 apples, 6 bananas and 2 cherries, plus 5 dollars shipping. "
        "Look up each price and compute the total cost with the tools.")
ANSWER = "The order costs 43 dollars."
ANSWER_NUMBER = "43"
SYSTEM = "You are a helpful assistant. Use the tools to compute exact results, then answer."

PRICES = {"apple": 3, "banana": 2, "cherry": 7}


def lookup_price(product: str) -> int:
    """Look up the unit price of a product in dollars.

    Args:
        product: The product name, for example 'apple'.
    """
    return PRICES[product.strip().lower().rstrip("s")]


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


FUNCTIONS = {"lookup_price": lookup_price, "add": add, "multiply": multiply}

# The nine tool calls the scripted model makes, in order; the observations are 3, 12, 2, 12, 7, 14, 24, 38, 43.
CALLS: list[tuple[str, dict]] = [
    ("lookup_price", {"product": "apple"}),
    ("multiply", {"a": 3, "b": 4}),
    ("lookup_price", {"product": "banana"}),
    ("multiply", {"a": 2, "b": 6}),
    ("lookup_price", {"product": "cherry"}),
    ("multiply", {"a": 7, "b": 2}),
    ("add", {"a": 12, "b": 12}),
    ("add", {"a": 24, "b": 14}),
    ("add", {"a": 38, "b": 5}),
]

# Hand-written OpenAI tool schemas used by the bare loops (the frameworks derive their own from the functions).
TOOLS_JSON = [
    {"type": "function", "function": {
        "name": "lookup_price", "description": "Look up the unit price of a product in dollars.",
        "parameters": {"type": "object", "properties": {
            "product": {"type": "string", "description": "The product name, for example 'apple'."}},
            "required": ["product"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "description": "The first number."},
            "b": {"type": "integer", "description": "The second number."}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {
        "name": "multiply", "description": "Multiply two numbers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "description": "The first number."},
            "b": {"type": "integer", "description": "The second number."}}, "required": ["a", "b"]}}},
]


def replies(final: str = "text", steps: int = 10) -> list[dict]:
    """The scripted replies for a run of ``steps`` model calls (``steps - 1`` tool calls, then the answer).

    ``final="text"``: the answer is a plain assistant message (ThinkFlow native, LangChain, bare loops).
    ``final="final_answer_tool"``: the answer is a ``final_answer`` tool call (smolagents' ToolCallingAgent).
    For longer runs the nine calls repeat (observations then differ from the comments above; the bench only
    checks the answer of 10-step runs).
    """
    out: list[dict] = []
    for i in range(steps - 1):
        name, args = CALLS[i % len(CALLS)]
        out.append({"calls": [[name, args, f"call_{i}"]]})
    if final == "final_answer_tool":
        out.append({"calls": [["final_answer", {"answer": ANSWER}, f"call_{steps - 1}"]]})
    else:
        out.append({"text": ANSWER})
    return out


def run_tool(name: str, arguments: dict) -> str:
    """Execute one of the task's tools; returns the observation text."""
    return str(FUNCTIONS[name](**arguments))

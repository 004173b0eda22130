"""Python tools of the agent-task suite (bench/suite.py): plain functions, schemas derived from their signatures."""


def fibonacci(n: int) -> int:
    """The n-th Fibonacci number (fibonacci(0) is 0, fibonacci(1) is 1).

    Args:
        n: Which Fibonacci number, 0 or more.
    """
    a, b = 0, 1
    for _ in range(int(n)):
        a, b = b, a + b
    return a


def word_count(text: str) -> int:
    """How many words ``text`` has (split on whitespace).

    Args:
        text: The text to count the words of.
    """
    return len(str(text).split())

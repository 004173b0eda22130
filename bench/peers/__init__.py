"""Implementations of the same 10-step task in ThinkFlow, bare LiteLLM, bare OpenAI SDK, LangChain and smolagents.

Each module exposes ``make(url: str, **options) -> Callable[[str], str]`` (build the agent once; the callable runs
one task and returns the final answer). ``driver.py`` times them against the bench server. The peer modules
(langchain_agent, smolagents_agent, bare_openai) run in ``bench/.venv-peers``; the others in the project's venv.
"""

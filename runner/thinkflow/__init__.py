"""ThinkFlow: a declarative, config-driven AI agent runner.

An agent is YAML (model, system prompt template, tools, loop limits, memory policy); ``thinkflow validate``
checks it and ``thinkflow-run agent.yaml "task"`` runs it in a ReAct loop. See ``DESIGN.md`` for the layout.
"""

__version__ = "0.1.0"

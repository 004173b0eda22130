"""A model reply -> an action (tool calls, a final answer or a format failure). Pure functions, no I/O."""

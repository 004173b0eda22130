"""The run engine: the ReAct loop, tool-call admission and execution, limits, planner, delegation, events, trace, sessions."""

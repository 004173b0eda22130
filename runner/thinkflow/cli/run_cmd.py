"""Placeholder: this command group is being built."""

COMMANDS: list = []

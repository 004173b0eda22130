"""The sandboxed Jinja environment and the texts ThinkFlow sends to a model."""

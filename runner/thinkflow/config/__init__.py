"""The config pipeline: YAML with line marks -> ${VAR} interpolation -> JSON Schema -> cross-references -> frozen specs."""

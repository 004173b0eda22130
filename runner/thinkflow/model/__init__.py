"""The model layer: messages, the ModelClient protocol, the LiteLLM client and the embedded llama.cpp model. The only importer of litellm and xllamacpp."""

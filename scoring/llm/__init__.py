"""What every run that asks a language model shares: generation, the LLM jury and the grader.

- ``record_text``: a patient's record as text (a documented, versioned serialization);
- ``records``: that text read from the database, once per worker process;
- ``prompts``: the prompt template (HELM's by default) and truncation to a context length with
  the model's own tokenizer, exact to the token (policies ``recent`` and ``bm25``);
- ``backends``: a local causal LM (``transformers``) or an allowlisted OpenAI-compatible
  endpoint, never a third-party service.

Importing this package loads no model and imports neither torch nor transformers.
"""

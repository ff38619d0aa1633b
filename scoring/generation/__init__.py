"""Generation runs: responses produced on the institution's own models (issue 14).

- ``record_text``: a patient's record as text (documented, versioned serialization);
- ``prompts``: the prompt template (HELM's by default) and truncation to a context length with
  the model's own tokenizer, exact to the token (policies ``recent`` and ``bm25``);
- ``backends``: a local causal LM (``transformers``) or an allowlisted OpenAI-compatible endpoint;
- ``tiny_lm``: a tiny random causal LM built offline for tests and benchmarks.

Importing this package loads no model and imports neither torch nor transformers.
"""

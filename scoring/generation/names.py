"""What a generated response is called: one model name per (model, context length).

The name is how a run recognises what it already generated (an instruction with a response of
that name is skipped), and how the run page and the studies page find a run's responses.
"""

MODEL_LABEL_MAX = 80


def response_model_name(label: str, context_length: int) -> str:
    """The response's model name, e.g. ``llama-3-8b@2048``."""
    return f"{label[:MODEL_LABEL_MAX]}@{context_length}"


def run_response_names(label: str, context_lengths: list[int]) -> list[str]:
    """Every model name a run with this label and these context lengths generates."""
    return [response_model_name(label, n) for n in context_lengths]

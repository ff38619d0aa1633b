"""Blinding: what a clinician sees of a response must not tell them which model wrote it.

Two leaks are closed here and in the selectors that use it:
- identifiers: responses are addressed by per-review random handles
  (``ResponseJudgement.handle``), never by database ids, which follow import order;
- the text itself: a response that names a model (flagged at import, ``names_own_model``) is
  shown with those words replaced by ``[model name]``.
"""

import re
from functools import lru_cache

from review.importers.loader import MODEL_FAMILY_WORDS

MASK = "[model name]"


@lru_cache(maxsize=512)
def _pattern(model_name: str) -> re.Pattern[str]:
    words = {w for w in MODEL_FAMILY_WORDS}
    name = model_name.strip()
    if len(name) >= 3:
        words.add(name)
    # A generated response's model name is "<model>@<context length>" (scoring.generation): the
    # text names the model without the length.
    base = name.rsplit("@", 1)[0].strip()
    if "@" in name and len(base) >= 3:
        words.add(base)
    # Longest first, so "gpt-4" is masked whole rather than leaving "-4" after "gpt".
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    # A family word runs on into its version suffix ("GPT-4o", "Llama-2-70b-chat", "Claude 3"):
    # mask the suffix too, or the version alone would still unblind.
    return re.compile(rf"(?<![\w-])(?:{alternatives})\w*(?:[-.]\w+|\s\d[\w.]*)*", re.IGNORECASE)


def mask_model_names(text: str, model_name: str) -> str:
    """``text`` with every mention of ``model_name`` or a known model family masked."""
    return _pattern(model_name).sub(MASK, text)

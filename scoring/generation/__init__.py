"""Generation runs: candidate responses produced on the institution's own models.

A kind of run on ``scoring.runs`` (``runs``: plan, work, identity; ``work``: one batch's
generation; ``names``: what a generated response is called; ``provenance``: the columns exports
carry; ``study``: which runs' responses may join a study round; ``tasks``, ``views``,
``selectors``). The models, prompts and record text it uses are ``scoring.llm``'s.
"""

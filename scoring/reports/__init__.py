"""Reports: how well each metric's ranking agrees with the clinicians'.

``statistics`` (Kendall's tau, bootstrap intervals, agreement, leaderboards; numpy/scipy),
``analysis`` (a report's results from a judgement table), ``learned`` (a metric learned from
the clinicians' rankings), ``plots`` (SVG), ``exports`` (CSV/JSON), and the report pages
(``views``, ``forms``), API (``api``), writes (``services``), reads (``selectors``) and task
(``tasks``).
"""

"""The synthetic demo: a MedAlign-shaped release, its accounts, work and a first report.

Nothing here is a real patient or a real clinician, and nothing in the app imports it except
the commands that load it (``load_demo``, ``demo_totp``). One module a question:

- ``synthetic``: patients, instructions and answers made from seeds;
- ``release``: that data written in the real release formats (``meds``: its MEDS cohort);
- ``accounts``: the four demo accounts, approved, with TOTP enrolled;
- ``assignments``, ``reviews``, ``rubrics``: their work, and simulated clinicians' reviews;
- ``report``: the first correlation report;
- ``load``: all of the above, in order, for ``load_demo``.
"""

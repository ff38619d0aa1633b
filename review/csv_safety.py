"""Spreadsheet-safe CSV cells, shared by every CSV export (audit log, research reports)."""


def csv_safe_cell(value: object) -> str:
    """``value`` as text, with a leading quote when a spreadsheet would read it as a formula.

    Cells starting with = + - @ (or a tab or carriage return) are evaluated by Excel, LibreOffice
    and Google Sheets ("formula injection"); the quote makes them plain text. Apply it to text
    that came from people (emails, user agents, model names), not to numbers: "-0.25" written
    as a number is a number.
    """
    text = "" if value is None else str(value)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + text
    return text

"""One display form for a record's sex, whichever format it came in.

MedAlign's XML writes OMOP's concept names ("FEMALE", "MALE"), OMOP exports carry concept ids
(8532, 8507) or a source value ("F", "m"), MEDS writes codes such as ``GENDER/F`` or
``SEX//male``. The record page, the admin's filter and the prompts should not show one sex in
four spellings, so every importer passes the value through ``normalise_sex``.
"""

# OMOP's gender concepts (the "Gender" vocabulary) and the usual spellings of each.
_SEX_FORMS = {
    "FEMALE": ("f", "female", "woman", "8532"),
    "MALE": ("m", "male", "man", "8507"),
    "UNKNOWN": ("u", "unk", "unknown", "8551"),
    "OTHER": ("o", "other", "8521"),
    "AMBIGUOUS": ("ambiguous", "8570"),
}
_BY_FORM = {form: shown for shown, forms in _SEX_FORMS.items() for form in forms}


def normalise_sex(value: str) -> str:
    """ "FEMALE", "MALE", … for the spellings above; anything else as given (trimmed)."""
    text = value.strip()
    key = text.lower().removesuffix(".0")  # "8507.0" from a spreadsheet round trip
    return _BY_FORM.get(key, text)

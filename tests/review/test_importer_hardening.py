"""The EHR XML importer's DTD and entity defences (issue 10, finding 8)."""

from pathlib import Path

import pytest

from review.importers import ImportFailed, import_release
from tests.review.test_importers import assert_nothing_stored, write
from tests.review.test_importers import release as release  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

BOMB = '<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'


@pytest.mark.parametrize(
    ("padding", "expected"),
    [
        ("<eventstream> " + "x" * (300 * 1024), "no root element in the first 256 KiB"),
        ("<eventstream> " + "x" * (100 * 1024), "DTD or entity declarations are not allowed"),
    ],
)
def test_a_long_leading_comment_cannot_hide_a_dtd(release: Path, padding, expected) -> None:
    # The pre-check reads the first 256 KiB: a longer comment, with a fake root inside it, used
    # to push the DOCTYPE out of its sight and let the file through.
    write(
        release,
        "ehrs/1000007.xml",
        f"<!-- {padding} -->\n{BOMB}\n<eventstream person_id='7'>&lol2;</eventstream>",
    )
    with pytest.raises(ImportFailed) as failure:
        import_release(release, dataset_name="t")
    assert expected in str(failure.value)
    assert_nothing_stored()


def test_a_dtd_after_a_comment_is_refused_by_the_parser_too(tmp_path: Path) -> None:
    import io

    from review.importers.ehr_xml import CountingReader, XMLImportError, iter_eventstream

    data = '<!-- c -->\n<!DOCTYPE eventstream [<!ENTITY x "y">]>\n<eventstream person_id="8"/>'
    with pytest.raises(XMLImportError, match="DTD or entity declarations are not allowed"):
        list(iter_eventstream(CountingReader(io.BytesIO(data.encode())), "8.xml"))


def test_an_entity_reference_in_note_text_is_an_import_error(release: Path) -> None:
    # Entities are not expanded: the text after one used to be dropped without a word.
    write(
        release,
        "ehrs/EHR_1000009.xml",
        '<record>\n<visit start="03/14/2019 09:00:00" end="03/14/2019 10:00:00"><day>'
        '<note start="03/14/2019 09:30:00" type="progress">Before &nbsp; after.</note>'
        "</day></visit></record>",
    )
    with pytest.raises(ImportFailed):
        import_release(release, dataset_name="t")
    assert_nothing_stored()

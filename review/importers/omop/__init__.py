"""OMOP CDM importer: ``person``, ``visit_occurrence``, the event tables (``condition_occurrence``,
``drug_exposure``, ``procedure_occurrence``, ``measurement``, ``observation``, ``note``,
``visit_detail``, ``device_exposure``, ``death``) and ``observation_period``, as CSV/TSV or
Parquet, with names from ``concept`` when that table is present. The CDM's other tables found
beside them are not read, and the import summary lists them as ignored.

Problems, all named by table, row (1 = first data row) and column, every one of a row's: a
person or visit that is not in its table, duplicate primary keys, unreadable ids or dates, empty
required values, events dated before the person's birth.

One module per question:
- ``cdm``: which tables are read, and each event table's columns;
- ``files``: where the tables are, and how one is read in record batches;
- ``values``, ``columns``: how a value, and a batch a column at a time, is read, and a bad one
  named;
- ``concepts``: what a concept id names;
- ``persons``: who the people are, and what is kept of each;
- ``visits``: which encounters there are, and which one an event's visit names;
- ``keys``: whether a table's primary key repeats;
- ``events``: what a row of an event table becomes;
- ``synonyms``: what other names the vocabulary gives the concepts the events use;
- ``loader``: in what order the tables are read, and how a table goes through.
"""

from .cdm import SUFFIXES
from .files import find_omop_tables, find_unread_omop_tables, iter_batches
from .loader import load_omop

__all__ = ["SUFFIXES", "find_omop_tables", "find_unread_omop_tables", "iter_batches", "load_omop"]

from .accounts import (
    AccessApplication,
    DUASignature,
    DUAVersion,
    RejectedEmailDomain,
    Role,
    User,
)
from .audit import AuditEvent
from .records import (
    Dataset,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    RecordExcerpt,
    ReferenceResponse,
    TaxonomyEntry,
)
from .reviews import Assignment, ErrorTag, ResponseJudgement, Review, response_label
from .studies import SamplingDraw, Study, StudyResponse
from .vocabulary import EventNameSynonym

__all__ = [
    "AccessApplication",
    "Assignment",
    "AuditEvent",
    "DUASignature",
    "DUAVersion",
    "Dataset",
    "Encounter",
    "EventNameSynonym",
    "ErrorTag",
    "Event",
    "Instruction",
    "ModelResponse",
    "Patient",
    "RecordExcerpt",
    "ReferenceResponse",
    "RejectedEmailDomain",
    "ResponseJudgement",
    "Review",
    "Role",
    "SamplingDraw",
    "Study",
    "StudyResponse",
    "TaxonomyEntry",
    "User",
    "response_label",
]

from .accounts import (
    AccessApplication,
    DUASignature,
    DUAVersion,
    RejectedEmailDomain,
    Role,
    User,
)
from .audit import AuditEvent
from .quality import (
    AdjudicatedJudgement,
    Adjudication,
    ClinicianExclusion,
    GoldItem,
    GoldJudgement,
    QualityPolicy,
)
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
from .rubrics import Criterion, CriterionGrade, CriterionGrading, Rubric
from .studies import SamplingDraw, Study, StudyResponse
from .vocabulary import EventNameSynonym

__all__ = [
    "AccessApplication",
    "AdjudicatedJudgement",
    "Adjudication",
    "Assignment",
    "AuditEvent",
    "ClinicianExclusion",
    "Criterion",
    "CriterionGrade",
    "CriterionGrading",
    "DUASignature",
    "DUAVersion",
    "Dataset",
    "Encounter",
    "EventNameSynonym",
    "GoldItem",
    "GoldJudgement",
    "ErrorTag",
    "Event",
    "Instruction",
    "ModelResponse",
    "Patient",
    "QualityPolicy",
    "RecordExcerpt",
    "ReferenceResponse",
    "RejectedEmailDomain",
    "ResponseJudgement",
    "Review",
    "Rubric",
    "Role",
    "SamplingDraw",
    "Study",
    "StudyResponse",
    "TaxonomyEntry",
    "User",
    "response_label",
]

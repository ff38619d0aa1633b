"""Label Studio 1.23.2 benchmark data: one organization, an admin, 50 annotators with legacy API
tokens, one MedAlign-shaped ranking project with 303 tasks.

Run with the LS venv's Python after sourcing env.sh and migrating (from the repository root):

    bash -c 'H=$PWD/tests/load/label_studio && source $H/env.sh && cd $LS_PKG &&
             $LS_VENV/bin/python $H/setup_ls.py'

Django is configured as label_studio/manage.py does (DJANGO_SETTINGS_MODULE=core.settings.label_studio,
LS package dir first on sys.path). Users, the organization and tokens are made through LS's own
model helpers (as `label-studio start --username ... --user-token ...` does); the project and its
tasks through LS's REST API (POST /api/projects/, POST /api/projects/<id>/import), called
in-process with DRF's APIClient and the admin's token, so the API's own validation, summaries
and signals run. Writes $LS_BENCH_DIR/accounts.json (project id, one token per annotator;
LS_BENCH_DIR defaults to /tmp/ls-bench, LS_BENCH_ACCOUNTS overrides the whole path).
"""

import json
import os
import random
import sys

LS_VENV = os.environ.get("LS_VENV", "/tmp/lsvenv")
LS_PKG = os.environ.get(
    "LS_PKG", os.path.join(LS_VENV, "lib/python3.11/site-packages/label_studio")
)
BENCH_DIR = os.environ.get("LS_BENCH_DIR", "/tmp/ls-bench")
sys.path.insert(0, LS_PKG)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")

import django  # noqa: E402 - LS models import only after django.setup()

django.setup()

from django.db import transaction  # noqa: E402 - LS models import only after django.setup()
from organizations.models import Organization  # noqa: E402 - LS models import only after django.setup()
from rest_framework.authtoken.models import Token  # noqa: E402 - LS models import only after django.setup()
from rest_framework.test import APIClient  # noqa: E402 - LS models import only after django.setup()
from users.models import User  # noqa: E402 - LS models import only after django.setup()

N_ANNOTATORS = int(os.environ.get("LS_BENCH_USERS", 50))
N_TASKS = int(os.environ.get("LS_BENCH_TASKS", 303))
N_RESPONSES = 6
OVERLAP = int(
    os.environ.get("LS_BENCH_OVERLAP", 20)
)  # as the MedAlign app's closed-loop run (MAX_OVERLAP 20)
OUT = os.environ.get("LS_BENCH_ACCOUNTS", os.path.join(BENCH_DIR, "accounts.json"))
ADMIN_EMAIL = "admin@bench.local"
ADMIN_PASSWORD = "bench-admin-pass"


def label_config() -> str:
    parts = [
        "<View>",
        '  <Header value="Instruction"/>',
        '  <Text name="instruction" value="$instruction"/>',
        '  <Header value="EHR excerpt"/>',
        '  <View style="max-height: 320px; overflow-y: auto; border: 1px solid #ddd; padding: 8px">',
        '    <Text name="excerpt" value="$excerpt"/>',
        "  </View>",
        '  <Header value="Model responses: mark each correct or incorrect"/>',
    ]
    for i in range(1, N_RESPONSES + 1):
        parts += [
            '  <View style="border: 1px solid #ccc; padding: 8px; margin: 6px 0">',
            f'    <Header value="Response {i}" size="5"/>',
            f'    <Text name="response_{i}" value="$response_{i}"/>',
            f'    <Choices name="correct_{i}" toName="response_{i}" choice="single" showInline="true" required="true">',
            '      <Choice value="Correct"/>',
            '      <Choice value="Incorrect"/>',
            "    </Choices>",
            "  </View>",
        ]
    parts += [
        '  <Header value="Rank the responses (best first)"/>',
        '  <List name="ranking" value="$rank_items" title="Responses"/>',
        '  <Ranker name="rank" toName="ranking"/>',
        "</View>",
    ]
    return "\n".join(parts)


# --- MedAlign-shaped synthetic data (deterministic) ------------------------------------------------
VERBS = ["Summarize", "List", "Describe", "Explain", "Identify", "Review", "Compare", "Outline"]
TOPICS = [
    "the trend of the patient's hemoglobin A1c over the last two years and any medication changes made in response",
    "all antihypertensive medications the patient has been prescribed and whether blood pressure goals were met",
    "the reason for the most recent emergency department visit and the follow-up plan documented afterwards",
    "the patient's history of chronic kidney disease including the latest eGFR and creatinine values",
    "any documented drug allergies and the reactions recorded for each of them in the chart",
    "the imaging studies performed for the patient's chest pain and their key findings and impressions",
    "the current anticoagulation regimen, its indication, and the most recent INR measurements recorded",
    "what the oncology notes say about the staging, treatment response and planned next cycle of therapy",
]
NOTE_TYPES = [
    "Progress Note",
    "Discharge Summary",
    "ED Provider Note",
    "Nursing Note",
    "Consult Note",
    "Lab Result",
    "Radiology Report",
    "Medication Order",
    "Telephone Encounter",
]
_WORD_TEXT = (
    "patient reports denies chest pain shortness breath fatigue nausea vomiting fever chills cough "
    "blood pressure heart rate glucose creatinine hemoglobin potassium sodium eGFR A1c LDL "
    "metformin lisinopril amlodipine atorvastatin insulin warfarin apixaban furosemide aspirin "
    "follow-up scheduled referral cardiology nephrology oncology imaging CT MRI x-ray ultrasound "
    "stable improved worsening unchanged recommended continue discontinue increase decrease dose "
    "history diabetes hypertension hyperlipidemia CKD CHF COPD asthma atrial fibrillation "
    "examination normal abnormal mild moderate severe bilateral left right lower extremity edema "
    "plan assessment labs ordered reviewed discussed with patient family agrees understands"
)
WORDS = _WORD_TEXT.split()


def sentence(rng: random.Random, lo: int = 8, hi: int = 18) -> str:
    w = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return " ".join(w).capitalize() + "."


def words_text(rng: random.Random, n_words: int) -> str:
    out, n = [], 0
    while n < n_words:
        s = sentence(rng)
        out.append(s)
        n += len(s.split())
    return " ".join(out)


def excerpt(rng: random.Random, target_bytes: int) -> str:
    lines, size = [], 0
    while size < target_bytes:
        y, m, d = rng.randint(2015, 2023), rng.randint(1, 12), rng.randint(1, 28)
        line = (
            f"[{y}-{m:02d}-{d:02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] "
            f"{rng.choice(NOTE_TYPES)}: "
            + " ".join(sentence(rng) for _ in range(rng.randint(1, 3)))
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def make_tasks() -> list[dict]:
    rng = random.Random(303)
    tasks = []
    for t in range(N_TASKS):
        instruction = f"{rng.choice(VERBS)} {rng.choice(TOPICS)}."  # ~15-22 words
        data = {
            "medalign_id": f"ma-{t:04d}",
            "instruction": instruction,
            "excerpt": excerpt(rng, rng.randint(2800, 3300)),  # ~3 KB
        }
        items = []
        for i in range(1, N_RESPONSES + 1):
            body = words_text(rng, rng.randint(60, 150))
            data[f"response_{i}"] = body
            items.append(
                {
                    "id": f"r{i}",
                    "title": f"Response {i}",
                    "body": " ".join(body.split()[:12]) + " ...",
                }
            )
        data["rank_items"] = items
        tasks.append(data)
    return tasks


# --- users, organization, tokens -------------------------------------------------------------------
def main() -> None:
    if User.objects.filter(email=ADMIN_EMAIL).exists():
        sys.exit(
            f"{ADMIN_EMAIL} already exists: recreate the database (see README.md) before running setup_ls.py again"
        )

    with transaction.atomic():
        admin = User.objects.create_user(
            email=ADMIN_EMAIL, password=ADMIN_PASSWORD, username="admin"
        )
        admin.is_staff = admin.is_superuser = True
        admin.save()
        org = Organization.create_organization(
            created_by=admin, title="MedAlign bench", legacy_api_tokens_enabled=True
        )
        # 1.23: legacy `Authorization: Token <key>` is refused (401) unless the org enables it
        # (jwt_auth.auth.TokenAuthenticationPhaseout); JWT personal access tokens are the default.
        org.jwt.legacy_api_tokens_enabled = True
        org.jwt.save()
        admin.active_organization = org
        admin.save(update_fields=["active_organization"])

        annotators = []
        for i in range(N_ANNOTATORS):
            u = User.objects.create_user(
                email=f"annotator{i:02d}@bench.local",
                username=f"annotator{i:02d}",
                first_name="Annotator",
                last_name=f"{i:02d}",
            )
            u.set_unusable_password()  # token auth only; skips 50 PBKDF2 hashes
            u.active_organization = org
            u.save()
            org.add_user(u)
            annotators.append(u)

    def token(u: User) -> str:
        return Token.objects.get_or_create(user=u)[0].key  # users.models creates one on post_save

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token(admin)}")
    r = client.post(
        "/api/projects/",
        {
            "title": "MedAlign clinician ranking",
            "description": "Rank six model responses to a clinician instruction over an EHR excerpt",
            "label_config": label_config(),
            "maximum_annotations": OVERLAP,
            "sampling": "Sequential sampling",
            "show_skip_button": True,
            "enable_empty_annotation": False,
        },
        format="json",
    )
    assert r.status_code == 201, (r.status_code, r.content[:1000])
    project_id = r.json()["id"]

    tasks = make_tasks()
    r = client.post(f"/api/projects/{project_id}/import", tasks, format="json")
    assert r.status_code == 201, (r.status_code, r.content[:1000])
    print("import:", r.json())

    # each annotator's token must authenticate and see the project
    for u in annotators[:3]:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Token {token(u)}")
        rr = c.get(f"/api/projects/{project_id}/")
        assert rr.status_code == 200, (u.email, rr.status_code, rr.content[:300])

    accounts = {
        "project_id": project_id,
        "admin": {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD, "token": token(admin)},
        "users": [{"id": u.id, "email": u.email, "token": token(u)} for u in annotators],
    }
    os.makedirs(os.path.dirname(os.path.abspath(OUT)), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(accounts, f, indent=1)
    sizes = sorted(len(json.dumps(t)) for t in tasks)
    print(
        f"project {project_id}: {len(tasks)} tasks (task JSON {sizes[0]}-{sizes[-1]} B, median {sizes[len(sizes) // 2]}), "
        f"overlap {OVERLAP}; {len(annotators)} annotators; wrote {OUT}"
    )


if __name__ == "__main__":
    main()

"""Print the MedAlign paper's tables rebuilt from a dataset's release judgements, each beside
the paper's published figure (``scoring.reports.paper``)."""

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset
from scoring.reports import services
from scoring.reports.errors import ReportError
from scoring.reports.formatting import interval, number, p_value
from scoring.reports.paper import PAPER_LABELS, paper_tables_for


def _pct(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, int | float) else "—"


class Command(BaseCommand):
    help = (
        "The MedAlign paper's tables (correctness, mean rank and win rate per model, the "
        "context-length comparison, the metric-clinician correlation) from a dataset's release "
        "judgements (binary_correct, model_rank), beside the paper's published figures."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--resamples", type=int, default=2000)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="print the tables as JSON")
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="NAME=PAPER MODEL",
            help="declare (and keep) that the dataset's model NAME is the paper's model (one of: "
            + "; ".join(PAPER_LABELS)
            + "); 'NAME=' removes the declaration; repeatable, audited",
        )

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=str(options["dataset"])).first()
        if dataset is None:
            raise CommandError(f"no dataset {options['dataset']!r}")
        mapping = {}
        for value in options["map"]:  # type: ignore[attr-defined]
            name, sep, label = str(value).partition("=")
            if not sep or not name.strip():
                raise CommandError(f"--map wants NAME=PAPER MODEL, not {value!r}")
            mapping[name.strip()] = label.strip()
        if mapping:
            try:
                changes = services.paper_model_names_set(
                    dataset=dataset, mapping=mapping, actor=None, channel="command"
                )
            except ReportError as exc:
                raise CommandError(str(exc)) from None
            for line in changes or ["the mapping was already so: nothing changed"]:
                self.stdout.write(f"mapped: {line}")
        tables = paper_tables_for(
            dataset,
            n_resamples=int(options["resamples"]),  # type: ignore[call-overload]
            seed=int(options["seed"]),  # type: ignore[call-overload]
        )
        if "empty" in tables:
            raise CommandError(tables["empty"])
        if options["json"]:
            self.stdout.write(json.dumps(tables, indent=1))
            return
        out = self.stdout.write
        unit = tables["clustering"]["unit"]
        out(f"The MedAlign paper's tables from {dataset.name}'s release judgements")
        out(f"Source: {tables['source']}.")
        out(f"Paper: {tables['citation']}")
        out(
            f"Intervals: 95% studentized cluster bootstrap over {unit}s "
            f"({tables['clustering']['n_clusters']} clusters)."
        )
        matching = tables["matching"]
        for m in matching["matched"]:
            how = "declared" if m["how"] == "declared" else "the release's spelling"
            out(f"Model {m['model']} is the paper's {m['paper_label']} ({how}).")
        if matching["unmatched_models"]:
            out(
                "Not matched to any of the paper's models (no published figure beside them; "
                'map one with --map "NAME=PAPER MODEL"): ' + ", ".join(matching["unmatched_models"])
            )
        if matching["paper_models_absent"]:
            out("The paper's models with no match: " + ", ".join(matching["paper_models_absent"]))
        out("")
        out("Table 3: correctness, win rate and mean rank per model")
        out(f"  {'model':<34} {'correct [CI]':<28} {'paper':>7}  {'WR':>6} {'paper':>6}  "
            f"{'rank':>5} {'paper':>6}")  # fmt: skip
        for m in tables["models"]:
            correct = interval(m["share_correct"], m["correct_ci_low"], m["correct_ci_high"])
            out(
                f"  {m['model'][:34]:<34} {correct:<28} {_pct(m['paper_correct']):>7}  "
                f"{number(m['win_rate']):>6} {number(m['paper_win_rate']):>6}  "
                f"{number(m['mean_rank'], 2):>5} {number(m['paper_mean_rank'], 2):>6}"
            )
        out("\nContext length (the paper: GPT-4 60.1% at 32k, 51.8% at 2k: 8.3 points)")
        for c in tables["context_length"]["comparisons"]:
            diff = interval(
                c["correct_difference"],
                c["correct_difference_ci_low"],
                c["correct_difference_ci_high"],
                note=c.get("correct_difference_note", ""),
            )
            p = p_value(
                c["correct_difference_p_value"],
                at_floor=bool(c.get("correct_difference_p_at_floor")),
            )
            out(
                f"  {c['base_model']} {c['long']} vs {c['short']}: correct "
                f"{_pct(c['share_correct_long'])} vs {_pct(c['share_correct_short'])}, "
                f"difference {diff} (p {p}); paper {_pct(c['paper_difference'])}"
            )
        if not tables["context_length"]["comparisons"]:
            out("  no model of this release is declared at two context lengths")
        out("\nTable 4: mean per-review Kendall tau-b between each metric and the clinician")
        for m in tables["metrics"]:
            mine = interval(m["mean_tau"], m["ci_low"], m["ci_high"], note=m["interval_note"])
            paper = (
                f"{m['paper_tau']:.2f} [{m['paper_ci_low']:.2f}, {m['paper_ci_high']:.2f}]"
                if m["paper_tau"] is not None
                else "—"
            )
            out(f"  {m['label'][:34]:<34} {mine:<32} paper {paper}")
        inter_rater = tables["paper_inter_rater"][0]
        out(f"  inter-rater (paper): {inter_rater:.2f}. {tables['inter_rater_note']}")

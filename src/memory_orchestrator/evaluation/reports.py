"""Report files of an evaluation run: ``report.json`` (every number), ``report.md`` and PNG plots.

Plots use matplotlib's Agg backend (no display needed); nothing random is drawn, so two runs over the
same data give the same files apart from timings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_orchestrator.evaluation.runner import BASELINE, EvalRun
from memory_orchestrator.evaluation.summary import summarise

#: Per-query latencies are kept for the distribution plot only.
LatencySamples = Mapping[str, Sequence[float]]


def write_json(summary: Mapping[str, Any], path: Path) -> Path:
    """Write the summary document (sorted keys, stable formatting)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return path


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.1f}"


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def metrics_table(modes: Mapping[str, Mapping[str, float]], ks: Sequence[int]) -> list[str]:
    """Markdown rows: one per mode, recall / nDCG / precision / all-gold per k, MRR, duplicates."""
    header = ["mode", *(f"R@{k}" for k in ks), *(f"nDCG@{k}" for k in ks), *(f"P@{k}" for k in ks)]
    header += [*(f"all@{k}" for k in ks), "MRR", f"dup@{max(ks)}", f"must-not@{min(ks)}", "errors"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for mode, values in modes.items():
        cells = [mode]
        for name in ("recall", "ndcg", "precision", "all_gold"):
            cells += [_pct(values.get(f"{name}@{k}")) for k in ks]
        cells += [_num(values.get("mrr")), _pct(values.get(f"duplicate_rate@{max(ks)}"))]
        cells.append(_pct(values.get(f"must_not_rate@{min(ks)}")))
        cells.append(str(int(values.get("errors", 0.0))))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def slice_table(cells: Mapping[str, Any], modes: Sequence[str], k: int) -> list[str]:
    """Markdown rows for one slice key: recall@k and nDCG@k per mode for each slice value."""
    header = ["slice", "n", *(f"{mode} R@{k}" for mode in modes), *(f"{mode} nDCG@{k}" for mode in modes)]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for value, cell in cells.items():
        stats = cell["modes"]
        row = [value, str(cell["queries"])]
        row += [_pct(stats.get(mode, {}).get(f"recall@{k}")) for mode in modes]
        row += [_pct(stats.get(mode, {}).get(f"ndcg@{k}")) for mode in modes]
        rows.append("| " + " | ".join(row) + " |")
    return rows


def latency_table(latency: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Markdown rows: p50 / p95 / max / mean per mode in milliseconds."""
    rows = ["| mode | p50 ms | p95 ms | max ms | mean ms |", "|---|---|---|---|---|"]
    for mode, values in latency.items():
        cells = [_num(values.get(name), 2) for name in ("p50", "p95", "max", "mean")]
        rows.append(f"| {mode} | " + " | ".join(cells) + " |")
    return rows


def eval_markdown(summary: Mapping[str, Any], plots: Sequence[Path]) -> str:
    """The human-readable evaluation report."""
    meta, config = summary["meta"], summary["config"]
    ks = list(config["ks"])
    cut = 10 if 10 in ks else ks[len(ks) // 2]
    modes = list(summary["overall"]["modes"])
    lines = [
        *_title_lines(summary, modes, ks),
        f"## Headline: {summary['headline']['set']} ({summary['headline']['queries']} queries)",
        "",
        "Percentages; R = recall (share of gold found), P = precision, all = every gold found, "
        "dup = share of returned items repeating an earlier one, must-not = share of queries with a "
        "must-not memory (superseded or wrong) in the top k (queries that list some).",
        "",
        *metrics_table(summary["headline"]["modes"], ks),
        "",
    ]
    lines += _context_lines(summary)
    lines += ["## All queries", "", *metrics_table(summary["overall"]["modes"], ks), ""]
    for key, cells in summary["slices"].items():
        lines += [f"## By {key.replace('_', ' ')}", "", *slice_table(cells, modes, cut), ""]
    lines += _loss_lines(summary, cut)
    lines += ["## Latency per query", "", *latency_table(summary["latency_ms"]), ""]
    lines += _ingest_lines(summary)
    lines += [f"![{path.stem}]({path.name})" for path in plots]
    lines += footer_lines(meta, config)
    return "\n".join(lines)


def footer_lines(meta: Mapping[str, Any], config: Any) -> list[str]:
    """The closing section of a report: versions and configuration as JSON, so a run can be reproduced."""
    payload = json.dumps({"versions": meta["versions"], "config": config}, indent=2, sort_keys=True)
    return ["", "## Versions and configuration", "", "```json", payload, "```", ""]


def _title_lines(summary: Mapping[str, Any], modes: Sequence[str], ks: Sequence[int]) -> list[str]:
    meta, config = summary["meta"], summary["config"]
    return [
        f"# Evaluation: {meta['dataset']} on {meta['backend']}",
        "",
        f"{meta['stores']} store(s), {meta['memories']} memories, {meta['queries']} queries; "
        f"modes {', '.join(modes)} (BM25 = `bm25s` over the same corpus); k = {', '.join(map(str, ks))}; "
        f"context budget {config['budget_tokens']} tokens. "
        f"Run {meta['started_at']} ({meta['duration_s']:.0f} s), "
        f"commit {meta['versions'].get('git') or '?'}.",
        "",
    ]


def _context_lines(summary: Mapping[str, Any]) -> list[str]:
    context = summary.get("headline_context") or {}
    if not context:
        return []
    return [
        "### Evidence kept after packing (headline set)",
        "",
        f"Gold evidence present in the packed context: **{_pct(context['evidence_kept'])}%**; "
        f"average context {context['avg_chars']:.0f} chars, ~{context['avg_est_tokens']:.0f} tokens, "
        f"{context['avg_items']:.1f} items.",
        "",
        "`context` items are in packing order (grouped by entity/time, chronological for episodic "
        "plans), not relevance order, so its ranked metrics are indicative; its real number is the "
        "evidence kept.",
        "",
    ]


def _loss_lines(summary: Mapping[str, Any], k: int) -> list[str]:
    rows = summary.get("losses") or []
    lines = [
        f"## Where an orchestrated mode loses (recall@{k} > 2 points below BM25, raw or keyword)",
        "",
    ]
    if not rows:
        return [*lines, "None.", ""]
    lines += ["| slice | value | n | mode | vs | mode R | ref R | gap |", "|---|---|---|---|---|---|---|---|"]
    metric = f"recall@{k}"
    for row in rows[:40]:
        reference = row[f"{row['versus']} {metric}"]
        lines.append(
            f"| {row['slice']} | {row['value']} | {row['queries']} | {row['mode']} | {row['versus']} | "
            f"{_pct(row[metric])} | {_pct(reference)} | {_pct(row['gap'])} |"
        )
    return [*lines, ""]


def _ingest_lines(summary: Mapping[str, Any]) -> list[str]:
    rows = summary.get("ingest") or []
    lines = [
        "## Ingestion",
        "",
        "| store | memories | links | back-dated | seconds | memories/s |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['store']} | {row['written']} | {row['links']} | {'yes' if row['backdated'] else 'NO'} | "
            f"{row['seconds']:.2f} | {row['memories_per_s']:.0f} |"
        )
    channels = summary.get("channel_index") or {}
    if channels:
        lines += ["", "| channel | memories indexed | seconds | memories/s |", "|---|---|---|---|"]
        for name, row in channels.items():
            lines.append(f"| {name} | {row['embedded']:.0f} | {row['seconds']:.2f} | {row['per_s']:.0f} |")
    warnings = summary.get("warnings") or []
    if warnings:
        lines += ["", f"{len(warnings)} warning(s), first ones:", ""]
        lines += [f"- {warning}" for warning in warnings[:10]]
    errors = summary.get("errors") or {}
    for mode, info in errors.items():
        lines += [f"- {mode}: {info['count']} failed queries, e.g. {info['examples'][0]}"]
    return [*lines, ""]


#: One marker per line, drawn smaller for each later line, so lines that overlap stay visible.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def marker_style(index: int) -> dict[str, Any]:
    """Marker, size and hollow fill of the ``index``-th line: overlapping points nest instead of hiding."""
    return {
        "marker": MARKERS[index % len(MARKERS)],
        "markersize": max(3.0, 9.0 - 1.2 * index),
        "markerfacecolor": "none",
        "markeredgewidth": 1.4,
    }


def recall_figure(summary: Mapping[str, Any]) -> Any:
    """The recall@k figure: y from 0 to 100 %, one marker shape per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = list(summary["config"]["ks"])
    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for index, (mode, values) in enumerate(summary["headline"]["modes"].items()):
        style = "--" if mode == BASELINE else "-"
        recall = [100.0 * values.get(f"recall@{k}", 0.0) for k in ks]
        axis.plot(ks, recall, style, label=mode, **marker_style(index))
    axis.set_xlabel("k")
    axis.set_ylabel("recall@k (%)")
    axis.set_xticks(ks)
    axis.set_ylim(0, 100)
    axis.set_title(f"Recall@k, {summary['headline']['set']}", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    return figure


def plot_recall_curves(summary: Mapping[str, Any], path: Path) -> Path:
    """Recall@k per mode (headline set), BM25 included."""
    import matplotlib.pyplot as plt

    figure = recall_figure(summary)
    figure.savefig(path)
    plt.close(figure)
    return path


def plot_slice_bars(summary: Mapping[str, Any], key: str, path: Path) -> Path:
    """Grouped bars: recall@10 (or the middle k) per slice value and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = list(summary["config"]["ks"])
    k = 10 if 10 in ks else ks[len(ks) // 2]
    cells = summary["slices"][key]
    values = list(cells)
    modes = list(summary["overall"]["modes"])
    width = 0.8 / max(1, len(modes))
    figure, axis = plt.subplots(figsize=(7.2, 4.2), dpi=110)
    for index, mode in enumerate(modes):
        heights = [100.0 * cells[value]["modes"].get(mode, {}).get(f"recall@{k}", 0.0) for value in values]
        axis.bar([x + index * width for x in range(len(values))], heights, width, label=mode)
    axis.set_xticks([x + width * (len(modes) - 1) / 2 for x in range(len(values))], values)
    axis.set_xlabel(key)
    axis.set_ylabel(f"recall@{k} (%)")
    axis.set_ylim(0, 100)
    axis.set_title(f"Recall@{k} by {key}", fontsize=9)
    axis.grid(alpha=0.3, axis="y")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def plot_latency(samples: LatencySamples, path: Path, *, title: str = "Latency per query") -> Path:
    """Box plot of per-call latency (ms, log scale) for each mode or operation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, values in samples.items() if values]
    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    if names:
        axis.boxplot([list(samples[name]) for name in names], showfliers=True)
        axis.set_xticks(range(1, len(names) + 1), names, rotation=15)
        axis.set_yscale("log")
    axis.set_ylabel("ms (log)")
    axis.set_title(title, fontsize=9)
    axis.grid(alpha=0.3, axis="y")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def latency_samples(run: EvalRun) -> dict[str, list[float]]:
    """Per-query latencies by mode."""
    samples: dict[str, list[float]] = {}
    for store in run.stores:
        for query in store.queries:
            for mode, outcome in query.modes.items():
                samples.setdefault(mode, []).append(outcome.latency_ms)
    return samples


def write_query_rows(run: EvalRun, path: Path) -> Path:
    """One JSON line per query: ids, slices, metrics and top ids per mode (no query or memory text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for store in run.stores:
            for query in store.queries:
                row = {
                    "store": query.store,
                    "id": query.query_id,
                    "gold": query.gold,
                    "slices": query.slices,
                    "modes": {
                        mode: {
                            "top": [position[0] for position in outcome.ranked[:10]],
                            "latency_ms": round(outcome.latency_ms, 3),
                            "metrics": {name: round(value, 4) for name, value in outcome.metrics.items()},
                            **({"error": outcome.error} if outcome.error else {}),
                        }
                        for mode, outcome in query.modes.items()
                    },
                }
                handle.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def write_eval_report(run: EvalRun, out: Path, *, per_query: bool = True) -> dict[str, Any]:
    """Write ``report.json``, ``report.md``, the plots and (optionally) ``queries.jsonl`` under ``out``.

    Returns the summary document with the written paths under ``files``.
    """
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(run)
    plots = [
        plot_recall_curves(summary, out / "recall_at_k.png"),
        *(
            [plot_slice_bars(summary, "category", out / "recall_by_category.png")]
            if "category" in summary["slices"]
            else []
        ),
        plot_latency(latency_samples(run), out / "latency.png"),
    ]
    paths = {"json": write_json(summary, out / "report.json")}
    markdown = out / "report.md"
    markdown.write_text(eval_markdown(summary, plots), encoding="utf-8")
    paths["markdown"] = markdown
    paths.update({plot.stem: plot for plot in plots})
    if per_query:
        paths["queries"] = write_query_rows(run, out / "queries.jsonl")
    return {**summary, "files": {key: str(path) for key, path in paths.items()}}

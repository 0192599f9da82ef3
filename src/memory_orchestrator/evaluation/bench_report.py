"""Report files of a benchmark run: ``bench.json``, ``bench.md`` and latency plots."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_orchestrator.evaluation.bench import OPERATIONS
from memory_orchestrator.evaluation.reports import footer_lines, marker_style, plot_latency, write_json


def _ms(value: float) -> str:
    return f"{value:.2f}"


def bench_markdown(document: Mapping[str, Any], plots: list[Path]) -> str:
    """The human-readable benchmark report."""
    config, meta = document["config"], document["meta"]
    sizes = ", ".join(str(row["size"]) for row in document["sizes"])
    lines = [
        f"# Benchmark: {meta['backend']} backend",
        "",
        f"Synthetic corpora (seed {config['seed']}): {sizes} memories; {config['queries']} timed queries "
        f"({config['warmup']} warm-up) and {config['writes']} writes "
        f"per size; top_k {config['top_k']}. memory_search = Orchestrator.search without expansion; "
        "memory_context = expanded (2 hops) and packed; memory_context_repeat(_cached) = the same "
        "memory_context call again without (with) the read cache; raw_recall = the backend's own recall; "
        "overhead = wall time minus time with a backend call in flight.",
        "",
        *([f"Note: {meta['note']}", ""] if meta.get("note") else []),
        "## Latency (ms)",
        "",
        "| size | operation | p50 | p95 | max | mean |",
        "|---|---|---|---|---|---|",
    ]
    for row in document["sizes"]:
        for name in OPERATIONS:
            if name not in row["latency_ms"]:  # a report written before the row existed
                continue
            cell = row["latency_ms"][name]
            lines.append(
                f"| {row['size']} | {name} | {_ms(cell['p50'])} | {_ms(cell['p95'])} | {_ms(cell['max'])} | "
                f"{_ms(cell['mean'])} |"
            )
    lines += _overhead_and_ingest_lines(document)
    lines += _growth_lines(document)
    lines += _transport_lines(document)
    lines += _start_lines(document)
    lines += [
        "",
        "Peak RSS is the process peak so far (sizes run in ascending order in one process, each store "
        "kept open for the growth measurement). Sanity recall: "
        "memory_search finding the memory a templated synthetic query was made from (a smoke check, not a "
        "quality measure: many memories share the same entity and topic word).",
        "",
    ]
    lines += [f"![{path.stem}]({path.name})" for path in plots]
    lines += footer_lines(meta, config)
    return "\n".join(lines)


def _overhead_and_ingest_lines(document: Mapping[str, Any]) -> list[str]:
    lines = ["", "## Orchestrator overhead over the backend (ms)", "", "| size | operation | p50 | p95 |"]
    lines.append("|---|---|---|---|")
    for row in document["sizes"]:
        for name, cell in row["overhead_ms"].items():
            lines.append(f"| {row['size']} | {name} | {_ms(cell['p50'])} | {_ms(cell['p95'])} |")
    lines += ["", "## Ingest and memory", "", "| size | seconds | memories/s | back-dated | peak RSS MiB | "
              "sanity recall@10 | errors |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in document["sizes"]:
        ingest = row["ingest"]
        lines.append(
            f"| {row['size']} | {ingest['seconds']:.1f} | {ingest['memories_per_s']:.0f} | "
            f"{'yes' if ingest['backdated'] else 'NO'} | {row['peak_rss_mb']:.0f} | "
            f"{100 * row['search_recall@10']:.1f}% | {row['errors']['count']} |"
        )
    return lines


def _growth_lines(document: Mapping[str, Any]) -> list[str]:
    growth = document.get("growth")  # none with one size, or in a report written before it existed
    if not growth:
        return []
    lines = [
        "",
        "## memory_context growth, the sizes interleaved (ms)",
        "",
        "| size | p50 | p95 | p50 over the smallest size's |",
        "|---|---|---|---|",
    ]
    for size, cell in growth["memory_context_ms"].items():
        ratio = growth["p50_over_smallest"][size]
        lines.append(f"| {size} | {_ms(cell['p50'])} | {_ms(cell['p95'])} | {ratio:.2f}x |")
    lines += [
        "",
        "Timed after every size above, on each size's store (kept open), with queries none of them had "
        "answered; each call is made on every store in turn before the next, so the ratio compares "
        f"the same moments. Errors: {growth['errors']['count']}.",
    ]
    return lines


def _transport_lines(document: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for row in document["sizes"]:
        measured = row.get("transports")
        if not measured:
            continue
        lines += [
            "",
            f"## memory_search through MCP at {row['size']} (the same calls, expand false)",
            "",
            "| path | p50 | p95 | added p50 |",
            "|---|---|---|---|",
        ]
        added = measured["added_p50_ms"]
        for path, cell in measured["memory_search_ms"].items():
            extra = _ms(added[path]) if path in added else "-"
            lines.append(f"| {path} | {_ms(cell['p50'])} | {_ms(cell['p95'])} | {extra} |")
        if any(path.endswith("_bare") for path in measured["memory_search_ms"]):
            lines += [
                "",
                "stdio and http: through the MCP SDK's client; *_bare: the same requests written and "
                "their answers read as bytes, without the SDK client's parsing and output-schema "
                "validation (what the transport and the server add). in_process: a backend opened for "
                "these calls on the same file, as cold as each server; every call is made on every "
                "path in turn before the next.",
            ]
        lines += [
            "",
            f"## HTTP load at {row['size']} (memory_search, stateless JSON-RPC, loopback, "
            f"{measured.get('http_workers', 1)} server process(es))",
            "",
            "| clients | seconds | calls | calls/s | p50 | p95 | errors |",
            "|---|---|---|---|---|---|---|",
        ]
        for level in measured["http_load"]:
            cell = level["latency_ms"]
            lines.append(
                f"| {level['clients']} | {level['seconds']} | {level['calls']} | {level['calls_per_s']} | "
                f"{_ms(cell['p50'])} | {_ms(cell['p95'])} | {level['errors']} |"
            )
    return lines


def _start_lines(document: Mapping[str, Any]) -> list[str]:
    start = document.get("start")  # none with --start-runs 0, or in a report written before it existed
    if not start:
        return []
    lines = ["", f"## Start-up (seconds, {start['runs']} starts each)", ""]
    if "error" in start:
        return [*lines, f"Not measured: {start['error']}"]
    cells = start["seconds"]
    rows = (
        ("orchestrator --version, to its exit", "version"),
        ("orchestrator serve (stdio), to its initialize answer", "serve_initialize"),
        ("orchestrator serve, to its tools/list answer", "serve_tools_list"),
        ("the MCP SDK's floor server, to its initialize answer", "floor_initialize"),
        ("the MCP SDK's floor server, to its tools/list answer", "floor_tools_list"),
    )
    lines += ["| process | median | best |", "|---|---|---|"]
    lines += [f"| {label} | {cells[key]['median']:.3f} | {cells[key]['best']:.3f} |" for label, key in rows]
    return [
        *lines,
        "",
        f"serve over the SDK's floor (medians): {start['serve_over_floor_s']:+.3f} s. The floor is the "
        "smallest server the MCP SDK makes (one tool, the collector handled as serve handles it); the "
        "two servers start alternately, on an empty data folder.",
    ]


def size_label(size: int) -> str:
    """A corpus size as people read it: 500, 1k, 10k, 100k, 1.5M."""
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return str(size)


def scaling_figure(document: Mapping[str, Any]) -> Any:
    """p50 and p95 latency per operation against corpus size; x ticks read 1k, 10k, 100k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    sizes = [row["size"] for row in document["sizes"]]
    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for index, name in enumerate(OPERATIONS):
        if any(name not in row["latency_ms"] for row in document["sizes"]):
            continue
        for share, style in (("p50", "-"), ("p95", ":")):
            values = [row["latency_ms"][name][share] for row in document["sizes"]]
            axis.plot(sizes, values, style, color=f"C{index}", label=f"{name} {share}", **marker_style(index))
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xticks(sizes, [size_label(size) for size in sizes])
    axis.xaxis.set_minor_locator(NullLocator())  # no 2x10^3 ... labels between the sizes
    axis.set_xlabel("memories in store")
    axis.set_ylabel("latency ms (log)")
    axis.set_title(f"Latency vs corpus size ({document['meta']['backend']})", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return figure


def plot_scaling(document: Mapping[str, Any], path: Path) -> Path:
    """p50 and p95 latency per operation against corpus size (log-log)."""
    import matplotlib.pyplot as plt

    figure = scaling_figure(document)
    figure.savefig(path)
    plt.close(figure)
    return path


def write_bench_report(document: dict[str, Any], out: Path) -> dict[str, Path]:
    """Write ``bench.json`` (samples included), ``bench.md`` and the plots under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    largest = document["sizes"][-1]
    plots = [
        plot_scaling(document, out / "latency_vs_size.png"),
        plot_latency(
            largest["samples_ms"],
            out / "latency_distribution.png",
            title=f"Latency per call at {largest['size']} memories",
        ),
    ]
    paths = {"json": write_json(document, out / "bench.json")}
    markdown = out / "bench.md"
    markdown.write_text(bench_markdown(document, plots), encoding="utf-8")
    paths["markdown"] = markdown
    paths.update({plot.stem: plot for plot in plots})
    return paths

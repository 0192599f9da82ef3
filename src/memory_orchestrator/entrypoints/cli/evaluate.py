"""``orchestrator eval`` (retrieval quality on eval-format datasets and LoCoMo) and ``orchestrator bench``.

The CLI mounts ``app`` as the ``eval`` group and ``bench`` as a command. Backends are built through the
plugin registry, each store in a fresh place: a temporary SQLite file, a new in-memory instance, or a
new store namespace (Neo4j).
"""

from __future__ import annotations

import importlib.util
import re
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from memory_orchestrator.entrypoints.cli.output import SafeConsole
from memory_orchestrator.entrypoints.cli.progress import TerminalProgress
from memory_orchestrator.entrypoints.cli.state import guarded, print_json, run, settings_of, state_of
from memory_orchestrator.entrypoints.config.bootstrap import build_plugins, build_scorers
from memory_orchestrator.entrypoints.config.settings import Settings
from memory_orchestrator.evaluation.modes import MODES
from memory_orchestrator.examples import example_path
from memory_orchestrator.plugins.manager import PluginManager
from memory_orchestrator.ports import InvalidRequest, MemoryBackend

if TYPE_CHECKING:
    from memory_orchestrator.evaluation.datasets import Dataset
    from memory_orchestrator.evaluation.runner import BackendMaker

# The evaluation stack (numpy, matplotlib, bm25s) is imported inside the commands that use it, so
# that every other `orchestrator` command starts without it (``evaluation.modes`` is plain data).
EVAL_PACKAGES = ("bm25s", "matplotlib", "numpy")

app = typer.Typer(
    name="eval",
    help="Measure retrieval quality: raw backend vs orchestrated vs expanded vs packed context, plus BM25.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = SafeConsole(stderr=True)


def parse_ints(text: str, option: str) -> tuple[int, ...]:
    """``"5,10,25"`` -> ``(5, 10, 25)``; anything else is an InvalidRequest naming the option."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise InvalidRequest(f"{option}: expected comma-separated integers, got {text!r}") from exc
    if not values or any(value <= 0 for value in values):
        raise InvalidRequest(f"{option}: expected positive integers, got {text!r}")
    return tuple(sorted(set(values)))


def parse_modes(text: str) -> tuple[str, ...]:
    """``all`` or a comma list of modes, in canonical order."""
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    if "all" in wanted:
        return MODES
    unknown = sorted(wanted - set(MODES))
    if unknown or not wanted:
        raise InvalidRequest(
            f"--mode: unknown {', '.join(unknown) or 'mode'}; choose from {', '.join(MODES)}, all"
        )
    return tuple(mode for mode in MODES if mode in wanted)


def check_backend(plugins: PluginManager, name: str) -> None:
    """Refuse a backend no plugin registers, saying why when we know."""
    if name in plugins.backends:
        return
    available = ", ".join(sorted(plugins.backends)) or "none"
    raise InvalidRequest(
        f"backend {name!r} is not available: no installed plugin registers it (available: {available})"
    )


def require_eval_extra() -> None:
    """A clear error when the optional evaluation packages are not installed."""
    missing = [name for name in EVAL_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidRequest(
            f"evaluation needs the [eval] extra ({', '.join(missing)} missing): "
            "pip install 'mnemon-memory-orchestrator[eval]'"
        )


def _store_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(parts))[:64]


def backend_maker(settings: Settings, plugins: PluginManager, name: str, workdir: Path) -> BackendMaker:
    """A factory of fresh backends, one per store, built by the backend's registered plugin."""
    run_id = uuid.uuid4().hex[:8]

    def make(store: str) -> MemoryBackend:
        options: dict[str, Any] = settings.backend_options(name)
        if name == "sqlite":
            options["path"] = str(workdir / f"{_store_name(store)}.db")
        elif name == "mnemon":
            # a throw-away Mnemon data folder: evaluation never touches the user's own stores
            options.update(data_dir=str(workdir / "mnemon"), create=True)
            options["store"] = _store_name("eval", run_id, store).replace(".", "-")
        elif name == "mcp_kg":
            # a throw-away memory file (and sidecar) per store, never the user's own graph
            options["memory_file"] = str(workdir / "mcp_kg" / f"{_store_name(store)}.jsonl")
            options.pop("memory_file_store", None)
        elif name != "memory":
            options["store"] = _store_name("eval", run_id, store)
        return plugins.create_backend(name, options)

    return make


@contextmanager
def _workdir() -> Iterator[Path]:
    # fresh stores (SQLite files, converted LoCoMo) live only for the run
    with tempfile.TemporaryDirectory(prefix="orchestrator-eval-") as folder:
        yield Path(folder)


def _load(dataset: Path, corpus: Path | None, workdir: Path) -> list[Dataset]:
    from memory_orchestrator.evaluation.datasets import load_dataset
    from memory_orchestrator.evaluation.locomo import import_locomo

    if dataset.is_file() and dataset.suffix == ".json":
        # a LoCoMo file: converted on the fly, never stored beside the package
        report = import_locomo(dataset, workdir / "locomo")
        console.print(
            f"LoCoMo: {report.memories} turns, {report.queries} questions, "
            f"{report.repaired_ids} evidence ids repaired, {report.dropped_ids} dropped, "
            f"{report.skipped_questions} questions skipped"
        )
        return load_dataset(workdir / "locomo")
    return load_dataset(dataset, corpus=corpus)


def _headline_table(summary: dict[str, Any], ks: tuple[int, ...]) -> Table:
    headline = summary["headline"]
    table = Table(title=f"{summary['meta']['dataset']}: {headline['set']} ({headline['queries']} queries)")
    table.add_column("mode")
    for k in ks:
        table.add_column(f"R@{k}", justify="right")
    for k in ks:
        table.add_column(f"nDCG@{k}", justify="right")
    table.add_column("MRR", justify="right")
    for mode, values in headline["modes"].items():
        cells = [f"{100 * values.get(f'recall@{k}', 0.0):.1f}" for k in ks]
        cells += [f"{100 * values.get(f'ndcg@{k}', 0.0):.1f}" for k in ks]
        table.add_row(mode, *cells, f"{values.get('mrr', 0.0):.3f}")
    return table


@app.callback()
def evaluate(
    ctx: typer.Context,
    dataset: Annotated[
        Path | None,
        typer.Option(
            "--dataset",
            "-d",
            help="queries.jsonl, a dataset folder (one store or several), or a LoCoMo .json.",
        ),
    ] = None,
    corpus: Annotated[
        Path | None, typer.Option(help="memories.jsonl when --dataset is a queries file.")
    ] = None,
    backend: Annotated[str | None, typer.Option("--backend", "-b", help="sqlite, memory, neo4j ...")] = None,
    mode: Annotated[
        str, typer.Option(help="raw, keyword, orchestrated, expanded, context (comma list) or all.")
    ] = "all",
    k: Annotated[str, typer.Option("--k", help="Cut-offs, comma separated.")] = "5,10,25",
    budget_tokens: Annotated[int, typer.Option(help="Token budget of the packed context.")] = 1500,
    limit: Annotated[int | None, typer.Option(help="Only the first N queries of each store.")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Report folder (default <data dir>/reports/<dataset>-<backend>, never the cwd)."),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole summary as JSON.")] = False,
    example: Annotated[
        str | None, typer.Option("--example", help="A bundled example set (atlas) instead of --dataset.")
    ] = None,
    stores: Annotated[
        str | None,
        typer.Option(
            "--stores",
            help="Only these stores of the dataset (LoCoMo: conversations such as conv-26), comma "
            "separated: tune on some, report on the others.",
        ),
    ] = None,
    channel: Annotated[
        list[str] | None,
        typer.Option(
            "--channel",
            help="A plugin retrieval channel (e.g. dense) to add as extra modes; repeatable. "
            "Default: the channels \\[channels] enables.",
        ),
    ] = None,
) -> None:
    """Evaluate retrieval on a dataset: every store in a fresh backend, every query in every mode."""
    if ctx.invoked_subcommand is not None:
        return
    if dataset is not None and example is not None:
        raise typer.BadParameter("give --dataset or --example, not both")
    if example is not None:
        dataset = guarded(lambda: example_path(example))
    if dataset is None:
        raise typer.BadParameter("--dataset or --example is required (or a subcommand such as import-locomo)")
    name = backend or state_of(ctx).backend or "sqlite"
    ks = guarded(lambda: parse_ints(k, "--k"))
    modes = guarded(lambda: parse_modes(mode))
    chosen = tuple(dict.fromkeys(part.strip() for part in (stores or "").split(",") if part.strip()))
    options = EvalOptions(dataset, corpus, out, progress, tuple(dict.fromkeys(channel or ())), chosen)
    summary = run(lambda: _evaluate(ctx, name, options, modes, ks, budget_tokens, limit))
    if as_json:
        print_json(summary)
        return
    SafeConsole().print(_headline_table(summary, ks))
    console.print(f"report: {summary['files']['markdown']}")


@dataclass(frozen=True, slots=True)
class EvalOptions:
    """Where an evaluation reads and writes."""

    dataset: Path
    corpus: Path | None
    out: Path | None
    progress: bool
    #: Plugin retrieval channels evaluated as extra modes (default: those ``[channels]`` enables).
    channels: tuple[str, ...] = ()
    #: Only the stores with these names (empty: every store of the dataset).
    stores: tuple[str, ...] = ()


def select_stores(stores: list[Dataset], names: tuple[str, ...]) -> list[Dataset]:
    """The stores named by ``--stores`` (all when none is named); an unknown name is an error."""
    if not names:
        return stores
    known = {store.name: store for store in stores}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InvalidRequest(
            f"--stores: no store named {', '.join(unknown)} in the dataset (it has {', '.join(known)})"
        )
    return [known[name] for name in names]


async def _evaluate(
    ctx: typer.Context,
    name: str,
    options: EvalOptions,
    modes: tuple[str, ...],
    ks: tuple[int, ...],
    budget_tokens: int,
    limit: int | None,
) -> dict[str, Any]:
    require_eval_extra()
    from memory_orchestrator.evaluation.reports import write_eval_report
    from memory_orchestrator.evaluation.runner import EvalConfig, run_evaluation

    settings = settings_of(ctx)
    plugins = build_plugins(settings)
    check_backend(plugins, name)
    names = options.channels or tuple(settings.channels.enabled)
    channels = [
        plugins.create_channel(channel, settings.channels.options.get(channel, {})) for channel in names
    ]
    config = EvalConfig(
        backend=name, modes=modes, ks=ks, budget_tokens=budget_tokens, query_limit=limit,
        pipeline=settings.pipeline_config(), channels=names,
    )  # fmt: skip
    dataset = options.dataset
    label = dataset.stem if dataset.is_file() else dataset.name
    with _workdir() as workdir, TerminalProgress(console=console, enabled=options.progress) as bar:
        stores = select_stores(_load(dataset, options.corpus, workdir), options.stores)
        maker = backend_maker(settings, plugins, name, workdir)
        scorers = build_scorers(settings, plugins)
        result = await run_evaluation(
            stores, maker, config, label=label, scorers=scorers, progress=bar, channels=channels
        )
    return write_eval_report(result, options.out or settings.data_dir / "reports" / f"{label}-{name}")


@app.command("import-locomo")
def import_locomo_command(
    source: Annotated[Path, typer.Argument(help="LoCoMo JSON (e.g. locomo10.json).")],
    out: Annotated[Path, typer.Option(help="Folder to write one eval-format store per conversation into.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the conversion counts as JSON.")] = False,
) -> None:
    """Convert LoCoMo into the eval format (CC BY-NC data: convert locally, do not redistribute)."""
    from memory_orchestrator.evaluation.locomo import import_locomo

    report = guarded(lambda: import_locomo(source, out))
    if as_json:
        print_json(report.to_dict())
        return
    typer.echo(
        f"{len(report.conversations)} conversations -> {out}: {report.memories} memories, {report.queries} "
        f"queries; evidence ids repaired {report.repaired_ids}, dropped {report.dropped_ids}; questions "
        f"skipped (no evidence left) {report.skipped_questions}"
    )


def bench(
    ctx: typer.Context,
    backend: Annotated[str | None, typer.Option("--backend", "-b", help="Backend to measure.")] = None,
    sizes: Annotated[str, typer.Option(help="Corpus sizes, comma separated.")] = "1000,10000",
    queries: Annotated[int, typer.Option(help="Timed queries per size.")] = 100,
    writes: Annotated[int, typer.Option(help="Timed writes per size.")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic corpora.")] = 7,
    out: Annotated[
        Path | None,
        typer.Option(help="Report folder (default <data dir>/reports/bench-<backend>, never the cwd)."),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole result as JSON.")] = False,
    transport_size: Annotated[
        int,
        typer.Option(
            help="Size at which memory_search is also timed over MCP stdio/HTTP and HTTP is "
            "loaded (SQLite only; 0 = never)."
        ),
    ] = 10000,
    load_clients: Annotated[
        str, typer.Option(help="Concurrent HTTP clients per load level.")
    ] = "1,10,50,200",
    load_seconds: Annotated[float, typer.Option(min=1, max=600, help="Seconds per load level.")] = 10.0,
    http_workers: Annotated[int, typer.Option(min=1, max=64, help="HTTP server processes under load.")] = 1,
    start_runs: Annotated[
        int,
        typer.Option(
            min=0, help="Starts of --version, serve and the MCP SDK's floor server to time (0 = never)."
        ),
    ] = 9,
) -> None:
    """Benchmark search/context/write latency, orchestrator overhead, RSS and ingest on synthetic data."""
    name = backend or state_of(ctx).backend or "sqlite"
    size_list = guarded(lambda: parse_ints(sizes, "--sizes"))
    clients = guarded(lambda: parse_ints(load_clients, "--load-clients"))

    async def action() -> dict[str, Any]:
        require_eval_extra()
        from memory_orchestrator.evaluation.bench import BenchConfig, run_bench
        from memory_orchestrator.evaluation.bench_report import write_bench_report

        settings = settings_of(ctx)
        target = out or settings.data_dir / "reports" / f"bench-{name}"
        plugins = build_plugins(settings)
        check_backend(plugins, name)
        config = BenchConfig(
            backend=name, sizes=size_list, queries=queries, writes=writes, seed=seed,
            pipeline=settings.pipeline_config(), transport_size=transport_size,
            load_clients=clients, load_seconds=load_seconds, http_workers=http_workers,
            start_runs=start_runs,
        )  # fmt: skip
        with _workdir() as workdir, TerminalProgress(console=console, enabled=progress) as bar:
            document = await run_bench(config, backend_maker(settings, plugins, name, workdir), progress=bar)
        paths = write_bench_report(document, target)
        return {**document, "files": {key: str(path) for key, path in paths.items()}}

    document = run(action)
    if as_json:
        print_json(document)
        return
    SafeConsole().print(_bench_table(document, name))
    growth = document.get("growth")
    if growth:
        cells = growth["memory_context_ms"]
        p50s = " / ".join(f"{size}: {cell['p50']:.1f} ms" for size, cell in cells.items())
        ratios = " / ".join(f"{ratio:.2f}x" for ratio in growth["p50_over_smallest"].values())
        console.print(f"memory_context p50, sizes interleaved: {p50s} ({ratios})")
    start = document.get("start")
    if start and "error" not in start:
        cells = start["seconds"]
        console.print(
            f"start-up medians: --version {cells['version']['median']:.3f} s, serve answers initialize "
            f"{cells['serve_initialize']['median']:.3f} s (the MCP SDK's floor server "
            f"{cells['floor_initialize']['median']:.3f} s)"
        )
    elif start:
        console.print(f"start-up not measured: {start['error']}")
    console.print(f"report: {document['files']['markdown']}")


def _bench_table(document: dict[str, Any], name: str) -> Table:
    table = Table(title=f"bench: {name}")
    columns = (
        "size",
        "search p50/p95 ms",
        "context p50/p95 ms",
        "repeat p50 ms: uncached / cached",
        "write p50/p95 ms",
        "ingest/s",
        "RSS MiB",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for row in document["sizes"]:
        latency = row["latency_ms"]
        search, context, write = (
            f"{latency[op]['p50']:.1f} / {latency[op]['p95']:.1f}"
            for op in ("memory_search", "memory_context", "memory_write")
        )
        repeat = (
            f"{latency['memory_context_repeat']['p50']:.2f} / "
            f"{latency['memory_context_repeat_cached']['p50']:.2f}"
        )
        rates = (f"{row['ingest']['memories_per_s']:.0f}", f"{row['peak_rss_mb']:.0f}")
        table.add_row(str(row["size"]), search, context, repeat, write, *rates)
    return table

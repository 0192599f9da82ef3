"""A bulk batch's link planning, on a second core when the machine has one.

``ports.autolinks.plan_links`` turns a write's candidate sketches into its automatic edges and link
candidates. It is a pure function, and no write of a batch reads what it returns (the edges are
stored at the batch's end, the candidates go into the write's result), so a batch can hand it to a
helper process and go on gathering the next write's candidates meanwhile: about a fifth of a bulk
write's CPU, done beside the rest instead of in its way. The helper also reads every memory of the
batch ahead of its write: its name candidates and extracted entities (``entity_inputs``: the text
alone decides them) and its lexical candidates (``lexicon.look_ahead``: the store as the batch found
it, over a read connection of the helper's own, plus the batch's earlier memories at the rowids they
will get); a write whose answer is not in yet reads its own, and a lookup counts only while every
earlier memory got the rowid the helper assumed (``written``).

A batch waits for no plan: at its end (``settle``) it takes the helper's from the first chunk on,
storing their edges while the helper plans on, and, whenever the next one is not in, plans the last
chunk nobody has taken itself and tells the helper to skip it (``Taken``); the two meet somewhere in
the middle. (The helper reads its messages through a thread of its own, so it sees those words
before it starts on a chunk.)

The helper is a Python process running :func:`main`, started at the first large batch and kept
until the backend closes; it imports this package from where the parent found it, so both run the
same code. The batch sends it chunks of writes over a pipe (length-framed pickles: each write's new
memory's sketch and its candidates' ids) through a writer thread, and a reader thread takes the
answers as they come, so the batch never waits on a full pipe. The two threads only move bytes; the
batch's own thread pickles what it sends and unpickles what it takes. (When the reader unpickled, it
held the GIL a millisecond or more at a time, and each of the batch's SQLite statements, which lets
the GIL go while SQLite works, then waited to get it back: 0.6-1.0 s of a 10k import's ~6 s.) The
helper reads the sketches of the stored candidates itself, from the store over its read connection
(``writes.load_sketches``, as the batch does), and keeps them from batch to batch
(``writes.SketchCache``): the batch used to load them and pickle each down the pipe once per batch,
~10% of its thread's time at 100k memories.

The parent keeps every write's inputs until the answers are in (a write it plans itself loads its
candidates' sketches then): when the helper cannot start, dies, stops reading, answers nonsense or
is silent for ``ANSWER_WAIT_S`` (a batch waits for its read of every text before taking any plan:
that is where a hung helper shows), the batch kills it, plans what is left itself and says so in
the log; a chunk whose stored candidates the helper cannot read it leaves unanswered, and the batch
plans it. Either way a write's edges are the ones ``plan_links`` gives in the parent
(``tests/unit/test_sqlite_bulk.py`` compares stored rows with and without the helper, and with a
helper killed mid-batch).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pickle
import queue
import sqlite3
import subprocess
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, Protocol, cast

import aiosqlite

from memory_orchestrator.adapters.sqlite.graph import EdgeRow, edge_rows
from memory_orchestrator.adapters.sqlite.lexicon import Ahead, look_ahead, read_connection
from memory_orchestrator.adapters.sqlite.sync_db import SyncConnection, run_to_end
from memory_orchestrator.adapters.sqlite.writes import SketchCache, load_sketches
from memory_orchestrator.ports.autolinks import MemorySketch, plan_links
from memory_orchestrator.ports.records import LinkCandidate
from memory_orchestrator.ports.text import extract_entities, name_candidates

LOG = logging.getLogger(__name__)

#: Batches smaller than this plan in process: the helper's start (~0.1-0.3 s of a second core) and the
#: pickling pay off over a few hundred writes.
HELPER_MIN_BATCH = 256
#: Writes per message to the helper: few messages, and the helper never far behind at the end.
CHUNK = 64
#: Seconds the helper gets to exit when the backend closes before it is killed.
EXIT_WAIT_S = 2.0
#: Bytes a message may have: an import's batch of 5,000 texts of at most 8 KB is 40 MB; a length
#: beyond this is no helper's (a single batch that large would plan in process, with a warning).
MAX_MESSAGE = 1 << 28
#: Sketches of stored memories the helper keeps from batch to batch. A 100k import took as long with
#: 16,384 as with 65,536 (the parent's ``SketchCache``): 66.0 and 63.3 s against 65.4 and 63.5 s, the
#: helper's CPU 46.0 and 44.0 s against 42.7 and 41.0 s (its misses read the store), its peak RSS
#: 93 MB against 172 (85 MB before it kept any).
HELPER_SKETCHES = 16384
#: Seconds a batch waits for one answer (a chunk takes milliseconds) before it gives the helper up
#: and plans the rest itself: a helper that hangs never hangs an import.
ANSWER_WAIT_S = 30.0


class Planned(NamedTuple):
    """What ``plan_links`` gives one write, as the batch stores and reports it."""

    rows: list[EdgeRow]
    candidates: tuple[LinkCandidate, ...]
    created: Counter[str]


def plan(new: MemorySketch, others: list[MemorySketch], at: datetime, counts: Mapping[str, int]) -> Planned:
    """The automatic edges (as rows) and link candidates of ``new`` among ``others``."""
    edges, candidates = plan_links(new, others, at=at, entity_counts=counts)
    created = Counter(edge.type._value_ for edge in edges)  # not the slower .value property
    return Planned(edge_rows(edges), candidates, created)


#: One write's inputs: the new memory's sketch, its candidates' ids, its stamp, entity counts.
Inputs = tuple[MemorySketch, list[str], datetime, Mapping[str, int]]
#: The sketches of stored memories (or of the batch's own, written earlier in it) by id, in any order.
SketchLoader = Callable[[Sequence[str]], list[MemorySketch]]
#: What a memory's text alone decides of its entities: its name candidates, its extracted names.
EntityInputs = tuple[set[str], tuple[str, ...]]
#: What the helper reads of a memory ahead of the batch: its ``EntityInputs``, then its lexical rows
#: (``lexicon.look_ahead``; ``None``: not looked up).
ReadAhead = tuple[set[str], tuple[str, ...], list[int] | None]


def entity_inputs(content: str) -> EntityInputs:
    """``ports.text.name_candidates`` and ``ports.text.extract_entities`` of ``content``."""
    return name_candidates(content), extract_entities(content)


class Planner(Protocol):
    """Plans a batch's writes in order; ``results`` has one ``Planned`` per ``add``."""

    def entity_inputs(self, index: int, content: str) -> EntityInputs:
        """:func:`entity_inputs` of the batch's memory number ``index``, whose text is ``content``."""

    def lexical(self, index: int) -> list[int] | None:
        """The lexical rows of the batch's memory number ``index`` as the helper looked them up ahead
        (``lexicon.py``), when it did and every earlier memory got the rowid it assumed; else
        ``None`` (the batch looks them up)."""

    def written(self, index: int, rowid: int) -> None:
        """The batch's memory number ``index`` got ``rowid`` (0: skipped as a duplicate)."""

    def add(self, new: MemorySketch, others: list[str], at: datetime, counts: Mapping[str, int]) -> None:
        """Plan one more write: ``new`` among its candidates, the memories ``others`` (ids)."""

    def flush(self) -> None:
        """Start on every write added so far (the batch adds no more)."""

    def settle(self) -> list[Planned] | None:
        """Once every write is added: more plans whose edges to store now (the helper's, or planned
        here while it is behind), in no particular order; ``None`` once every plan was given."""

    def results(self) -> list[Planned]:
        """Every write's plan, in order (:meth:`settle` first, until it gives ``None``)."""


class LocalPlanner:
    """Plans each write at once, in this process (``load``: the candidates' sketches)."""

    def __init__(self, load: SketchLoader) -> None:
        self._load = load
        self._planned: list[Planned] = []
        self._settled = False

    def entity_inputs(self, index: int, content: str) -> EntityInputs:
        """Read from ``content`` now."""
        return entity_inputs(content)

    def lexical(self, index: int) -> list[int] | None:
        """Nothing is looked up ahead."""
        return None

    def written(self, index: int, rowid: int) -> None:
        """Nothing was assumed."""

    def add(self, new: MemorySketch, others: list[str], at: datetime, counts: Mapping[str, int]) -> None:
        """Plan one more write now."""
        self._planned.append(plan(new, self._load(others), at, counts))

    def flush(self) -> None:
        """Nothing waits: each write was planned as it came."""

    def settle(self) -> list[Planned] | None:
        """Every plan, the first time; then ``None``."""
        if self._settled:
            return None
        self._settled = True
        return self._planned

    def results(self) -> list[Planned]:
        """Every write's plan, in order."""
        return self._planned


def _fields(sketch: MemorySketch) -> tuple[object, ...]:
    # a plain tuple pickles in C; the frozen dataclass would go through Python-level state methods
    return (sketch.id, sketch.content, sketch.source, sketch.created_at, sketch.tokens, sketch.entities)


#: The helper's first message: it runs this module's protocol (nothing is sent to it before).
HELLO = ("memory-orchestrator bulk planner", 4)
#: Parent -> helper, first of a batch: ("prepare", batch number, the texts of its memories, what its
#: lexical lookups need, if the helper is to look them up, the store's file, where the helper reads
#: the sketches of the stored memories among the candidates).
Prepare = tuple[str, int, list[str], Ahead | None, str | None]
#: Parent -> helper: ("plan", batch number, chunk number, the sketches of its new memories as
#: ``_fields``, the writes as (ids: the new memory's, then its candidates'; stamp; entity counts)).
Chunk = tuple[str, int, int, list[tuple[object, ...]], list[tuple[list[str], datetime, dict[str, int]]]]
#: Parent -> helper: ("taken", batch number, chunk number): the batch plans its chunks from this one
#: on itself (the helper skips them).
Taken = tuple[str, int, int]
#: Helper -> parent: ("prepared", batch, chunk, ``ReadAhead`` of CHUNK texts) for the texts in order,
#: then ("planned", batch, chunk, one ``Planned`` per write of that chunk).
Answer = tuple[str, int, int, list[Any]]


class _Failed(NamedTuple):
    reason: str


class _Link:
    """One started helper process, with its own queues: a helper started after another never sees
    what was meant for or came from the first."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        #: Messages already framed (``frame``), and answers as read (``read_frame``): the threads only
        #: move bytes, so they hold the GIL for microseconds (see ``_read``).
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.answers: queue.SimpleQueue[bytes | _Failed] = queue.SimpleQueue()
        #: Set once the helper has said ``HELLO`` (or is stopped): nothing is written to it before.
        self.ready = threading.Event()
        self.closed = False
        assert process.stdin is not None and process.stdout is not None
        for target, name in ((self._write, "writer"), (self._read, "reader")):
            threading.Thread(target=target, name=f"bulk-planner-{name}", daemon=True).start()

    def _write(self) -> None:
        # The only thread that touches the helper's input: closing it elsewhere would wait for a
        # write blocked on a full pipe, that is on a helper not reading any more.
        stream = self.process.stdin
        assert stream is not None
        try:
            while (message := self.outbox.get()) is not None:
                self.ready.wait()
                if self.closed:
                    break
                _write_frame(stream, message)
        except (OSError, ValueError):
            pass  # the helper is gone: the reader reports it
        finally:
            with contextlib.suppress(OSError, ValueError):
                stream.close()  # the helper's end of input: it exits

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        try:
            if get(stream) != HELLO:
                raise ValueError("it does not speak the planner's protocol")
            self.ready.set()
            while True:
                self.answers.put(read_frame(stream))
        except Exception as exc:  # EOF (the helper exited), or not our helper
            self.answers.put(_Failed(f"{type(exc).__name__}: {exc}"))

    def close(self, *, kill: bool = False) -> None:
        """Stop the helper: it exits when the writer has closed its input, or is killed (at once
        with ``kill``, else after ``EXIT_WAIT_S``), so no thread waits on it for ever."""
        self.closed = True
        self.outbox.put(None)
        self.ready.set()  # a writer still waiting for HELLO goes on to its end
        if kill:
            self.process.kill()
        try:
            self.process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()  # a blocked writer or reader then sees the pipe closed
            self.process.wait()


class Helper:
    """The helper process of one backend, started at its first large batch, with two threads: one
    writes the chunks it is handed (so a batch never waits on a full pipe), one reads the answers."""

    def __init__(self, *, enabled: bool = True) -> None:
        #: ``False``: every batch plans in process.
        self.enabled = enabled
        self._link: _Link | None = None
        self._batches = 0
        #: Chunks of writes the helper has planned, texts whose entity inputs it read, and memories
        #: whose lexical rows it looked up, so far (those the batches used).
        self.answered = 0
        self.read_ahead = 0
        self.looked_up = 0
        #: Chunks the batches planned themselves while the helper was behind (``results``).
        self.taken = 0
        #: Why the helper was given up, if it was: no other is started (batches plan in process).
        self.broken: str | None = None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running helper, if any."""
        return self._link.process if self._link is not None else None

    def planner(
        self, contents: list[str], load: SketchLoader, ahead: Ahead | None = None, store: str | None = None
    ) -> Planner:
        """A planner for a batch of memories with these ``contents`` (``load``: the sketches of their
        candidates, as the batch sees them): the helper's when it is worth it and works. It also
        looks up their lexical candidates, given ``ahead``, and reads the sketches of the stored ones
        among their candidates from ``store`` (the store's file)."""
        if not self.enabled or len(contents) < HELPER_MIN_BATCH or self.broken is not None:
            return LocalPlanner(load)
        # a frozen application's executable is no Python that runs ``-c``
        if usable_cores() < 2 or getattr(sys, "frozen", False):
            return LocalPlanner(load)
        if self._link is None and not self._start():
            return LocalPlanner(load)
        self._batches += 1
        return _HelperPlanner(self, self._batches, contents, load, ahead, store)

    def _start(self) -> bool:
        package = Path(__file__).resolve().parents[3]  # the folder holding memory_orchestrator
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")]))
        try:
            # -P: the working directory is not put on the path (only this code is imported)
            process = subprocess.Popen(
                [sys.executable, "-P", "-c", f"from {__name__} import main; main()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.give_up(f"could not start ({exc})")
            return False
        self._link = _Link(process)
        return True

    def send(self, message: Prepare | Chunk | Taken) -> bool:
        """Queue one message for the helper; ``False`` once it has been given up."""
        if self.broken is not None or self._link is None:
            return False
        self._link.outbox.put(frame(message))
        return True

    def answer(self, *, wait: bool = True) -> Answer | None:
        """The next answer; ``None`` when there is none yet (``wait=False``), or when the helper
        failed or took longer than ``ANSWER_WAIT_S`` (it is then given up)."""
        link = self._link
        if self.broken is not None or link is None:
            return None
        try:
            answer = link.answers.get(timeout=ANSWER_WAIT_S) if wait else link.answers.get_nowait()
        except queue.Empty:
            if wait:
                self.give_up(f"did not answer within {ANSWER_WAIT_S:g} s")
            return None
        if isinstance(answer, _Failed):
            self.give_up(f"stopped ({answer.reason})")
            return None
        try:
            found = pickle.loads(answer)
        except Exception as exc:  # not our helper's
            self.give_up(f"answered nonsense ({type(exc).__name__}: {exc})")
            return None
        if not (isinstance(found, tuple) and len(found) == 4 and isinstance(found[3], list)):
            self.give_up(f"answered nonsense (unexpected answer {type(found).__name__})")
            return None
        return cast(Answer, found)

    def give_up(self, reason: str) -> None:
        """Stop the helper for good and log why; later batches plan in process."""
        if self.broken is None:
            self.broken = reason
            LOG.warning("the bulk link planner helper %s; batches plan their links in process", reason)
        self.close(kill=True)

    def close(self, *, kill: bool = False) -> None:
        """Stop the helper, if one runs (``kill``: without waiting for it to exit); idempotent (a
        later large batch starts another)."""
        link, self._link = self._link, None
        if link is not None:
            link.close(kill=kill)


class _HelperPlanner:
    """A batch's writes, planned by the helper chunk by chunk; whatever it does not answer is planned
    here from the inputs kept meanwhile (the candidates' sketches loaded then, by ``load``)."""

    def __init__(
        self,
        helper: Helper,
        batch: int,
        contents: list[str],
        load: SketchLoader,
        ahead: Ahead | None,
        store: str | None,
    ) -> None:
        self._helper = helper
        self._batch = batch
        self._load = load
        self._inputs: list[Inputs] = []
        #: The sketches of the new memories of the chunk being filled (the helper reads the stored ones).
        self._fresh: list[tuple[object, ...]] = []
        self._writes: list[tuple[list[str], datetime, dict[str, int]]] = []
        #: Writes in each chunk sent, in order.
        self._sizes: list[int] = []
        self._failed = False
        #: What the helper read of the batch's texts so far, and how many it will send.
        self._prepared: list[ReadAhead] = []
        self._texts = len(contents) if helper.send(("prepare", batch, contents, ahead, store)) else 0
        #: The rowids the helper's lookups assume, while the batch's agree (``written``).
        self._rows = ahead.rows if ahead is not None else None
        #: Plans answered but not yet taken, by chunk.
        self._answers: dict[int, list[Planned]] = {}
        #: Plans of the helper's given by ``settle`` (in order, from the first chunk), and the chunks
        #: they fill.
        self._given: list[Planned] = []
        self._front = 0
        #: The chunks from this one on the batch plans itself (``settle``; ``None``: not begun), and
        #: their plans; the plans of the writes never sent (``None`` until ``settle`` is done).
        self._back: int | None = None
        self._here: dict[int, list[Planned]] = {}
        self._unsent: list[Planned] | None = None

    def entity_inputs(self, index: int, content: str) -> EntityInputs:
        """The helper's answer when it is in (it reads the texts far faster than the batch writes
        them, once started), else read from ``content`` here."""
        if self._arrived(index):
            self._helper.read_ahead += 1
            names, extracted, _ = self._prepared[index]
            return names, extracted
        return entity_inputs(content)

    def lexical(self, index: int) -> list[int] | None:
        """The helper's lookup, when it is in and its rowids held so far."""
        if self._rows is None or not self._arrived(index):
            return None
        found = self._prepared[index][2]
        if found is not None:
            self._helper.looked_up += 1
        return found

    def written(self, index: int, rowid: int) -> None:
        """Check the rowid the helper assumed: from the first that differs, the batch looks up."""
        if self._rows is not None and self._rows[index] != rowid:
            LOG.debug(
                "memory %d of a batch got rowid %d, not %d: it looks up its candidates",
                index,
                rowid,
                self._rows[index],
            )
            self._rows = None

    def _arrived(self, index: int, *, wait: bool = False) -> bool:
        # whether the helper's read of text number ``index`` is in, taking the answers that came (or,
        # with ``wait``, waiting for them)
        prepared = self._prepared
        while index >= len(prepared) and len(prepared) < self._texts:
            answer = self._helper.answer(wait=wait)
            if answer is None or not self._take(answer):
                break
        return index < len(prepared)

    def _take(self, answer: Answer) -> bool:
        """File one answer (an earlier batch's is dropped); ``False`` for one out of order, and the
        helper is given up."""
        kind, batch, chunk, items = answer
        if batch != self._batch:
            return True  # an earlier batch's, which failed before it read its answers
        done = len(self._prepared)
        if kind == "prepared" and chunk * CHUNK == done and len(items) == min(CHUNK, self._texts - done):
            self._prepared.extend(items)
            return True
        sent = self._sizes
        if (
            kind == "planned"
            and chunk < len(sent)
            and len(items) == sent[chunk]
            and chunk not in self._answers
        ):
            self._answers[chunk] = items
            return True
        self._helper.give_up("answered out of order")
        return False

    def add(self, new: MemorySketch, others: list[str], at: datetime, counts: Mapping[str, int]) -> None:
        """Queue one more write (sent with its chunk): the new memory's sketch, its candidates' ids."""
        self._inputs.append((new, others, at, counts))
        if self._failed:
            return
        self._fresh.append(_fields(new))
        self._writes.append(([new.id, *others], at, dict(counts)))
        if len(self._writes) >= CHUNK:
            self._send()

    def _send(self) -> None:
        if self._helper.send(("plan", self._batch, len(self._sizes), self._fresh, self._writes)):
            self._sizes.append(len(self._writes))
        else:
            self._failed = True
        self._fresh, self._writes = [], []

    def flush(self) -> None:
        """Send the last chunk, however small, so the helper plans it while the batch goes on."""
        if self._writes and not self._failed:
            self._send()

    def _answered(self) -> list[Planned]:
        """The plans of the chunks answered since the last call, from the first chunk not given on
        (up to the chunks the batch plans itself)."""
        helper = self._helper
        fresh: list[Planned] = []
        end = len(self._sizes) if self._back is None else self._back
        while self._front < end:
            if self._front in self._answers:
                fresh += self._answers.pop(self._front)
                self._front += 1
                helper.answered += 1
            elif (answer := helper.answer(wait=False)) is None or not self._take(answer):
                break
        self._given += fresh
        return fresh

    def settle(self) -> list[Planned] | None:
        """One step of meeting the helper at the batch's end. The helper plans from the first chunk
        on; whenever its answer to the next chunk is not in, the batch plans the last chunk nobody
        has taken and tells the helper to skip it (``Taken``), so the two meet and the batch waits
        for no plan. Before the first step it waits (each answer at most ``ANSWER_WAIT_S``) for the
        helper's read of every text, which the helper sends first: that is how a helper that hangs
        is found out. What the helper does not give (it failed) is planned here, in the last step."""
        helper = self._helper
        if self._back is None:
            self.flush()
            self._arrived(self._texts - 1, wait=True)
            self._back = len(self._sizes)
        if fresh := self._answered():
            return fresh
        if self._front < self._back and helper.broken is None:
            self._back = back = self._back - 1
            helper.send(("taken", self._batch, back))
            helper.taken += 1
            return self._plan_here(back)
        if self._unsent is not None:
            return None
        rest: list[Planned] = []
        for chunk in range(self._front, self._back):  # neither answered nor taken: the helper failed
            rest += self._plan_here(chunk)
        self._unsent = [self._plan(inputs) for inputs in self._inputs[sum(self._sizes) :]]
        return rest + self._unsent

    def _plan_here(self, chunk: int) -> list[Planned]:
        # the plans of the writes sent in ``chunk``, made here (and kept for ``results``)
        start = sum(self._sizes[:chunk])
        planned = self._here[chunk] = [
            self._plan(inputs) for inputs in self._inputs[start : start + self._sizes[chunk]]
        ]
        return planned

    def _plan(self, inputs: Inputs) -> Planned:
        new, others, at, counts = inputs
        return plan(new, self._load(others), at, counts)

    def results(self) -> list[Planned]:
        """Every write's plan, in order (``settle`` until every one is given)."""
        while self.settle() is not None:
            pass
        planned = list(self._given)
        for chunk in range(self._front, len(self._sizes)):
            planned += self._here[chunk]
        return planned + (self._unsent or [])


def usable_cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """The helper's loop: answer each message read from ``source`` on ``sink``."""
    gc.disable()  # it makes sketches, edges and rows, none of them in a cycle
    put(sink, HELLO)
    #: The sketches of the batch's new memories, then of stored memories (kept from batch to batch:
    #: the same ones are candidates batch after batch; a batch's own are stored once it committed,
    #: and ids are never reused, so one that rolled back is never asked for again).
    sketches: dict[str, MemorySketch] = {}
    kept = SketchCache(HELPER_SKETCHES)
    stores: dict[str, sqlite3.Connection] = {}
    store: str | None = None
    inbox = _Inbox(source)
    while (message := inbox.next()) is not None:
        if message[0] == "prepare":  # a new batch: the last one's memories are stored ones now
            _, batch, contents, ahead, store = cast(Prepare, message)
            for item in sketches.values():
                kept.put(item)
            sketches.clear()
            lexical = _lookups(stores, ahead, contents)
            for chunk, start in enumerate(range(0, len(contents), CHUNK)):
                items = [(*entity_inputs(text), next(lexical)) for text in contents[start : start + CHUNK]]
                put(sink, ("prepared", batch, chunk, items))
            continue
        _, batch, chunk, fresh, writes = cast(Chunk, message)
        if inbox.taken(batch, chunk):
            continue  # and so are the batch's later chunks: none needs this one's sketches
        for fields in fresh:
            sketches[cast(str, fields[0])] = MemorySketch(*cast(Any, fields))
        chunk_sketches = _chunk_sketches(stores, store, writes, sketches, kept)
        if chunk_sketches is None:
            continue  # no answer: the batch plans this chunk itself
        plans = []
        for ids, at, counts in writes:
            found = [chunk_sketches[memory_id] for memory_id in ids]
            plans.append(plan(found[0], found[1:], at, counts))
        put(sink, ("planned", batch, chunk, plans))


class _Inbox:
    """The helper's messages, read by a thread as they come (it only moves bytes) and unpickled here,
    where the batches' ``Taken`` are kept rather than returned."""

    def __init__(self, source: IO[bytes]) -> None:
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._ready: deque[Prepare | Chunk] = deque()
        #: batch -> its first chunk the batch plans itself.
        self._taken: dict[int, int] = {}
        self._ended = False
        threading.Thread(target=self._receive, args=(source,), name="bulk-planner-inbox", daemon=True).start()

    def _receive(self, source: IO[bytes]) -> None:
        try:
            while True:
                self._frames.put(read_frame(source))
        except Exception:  # the end of the input, or not the parent's: either way, done
            self._frames.put(None)

    def next(self) -> Prepare | Chunk | None:
        """The next message to answer (waiting for it); ``None`` once the input has ended."""
        while not self._ready and not self._ended:
            self._file(self._frames.get())
        if not self._ready:
            return None
        message = self._ready.popleft()
        if message[0] == "prepare":  # the earlier batches are over
            self._taken = {batch: chunk for batch, chunk in self._taken.items() if batch >= message[1]}
        return message

    def taken(self, batch: int, chunk: int) -> bool:
        """Whether the batch plans ``chunk`` itself, as far as the messages already sent tell."""
        while not self._ended:
            try:
                frame = self._frames.get_nowait()
            except queue.Empty:
                break
            self._file(frame)
        return chunk >= self._taken.get(batch, chunk + 1)

    def _file(self, frame: bytes | None) -> None:
        if frame is None:
            self._ended = True
            return
        message = pickle.loads(frame)
        if message[0] == "taken":
            _, batch, chunk = cast(Taken, message)
            self._taken[batch] = min(chunk, self._taken.get(batch, chunk))
        else:
            self._ready.append(message)


def _chunk_sketches(
    stores: dict[str, sqlite3.Connection],
    store: str | None,
    writes: list[tuple[list[str], datetime, dict[str, int]]],
    sketches: dict[str, MemorySketch],
    kept: SketchCache,
) -> dict[str, MemorySketch] | None:
    """The sketches of a chunk's memories and candidates by id: from ``sketches`` (the batch's new
    memories), ``kept``, or else read from ``store`` as the batch reads them (``load_sketches``:
    stored memories, each a candidate because it was active in the store as the batch found it, and
    no one else writes while the batch does) and kept. ``None`` when some cannot be read."""
    chunk: dict[str, MemorySketch] = {}
    stored: set[str] = set()
    for ids, _, _ in writes:
        for memory_id in ids:
            item = sketches.get(memory_id)
            if item is None:
                stored.add(memory_id)
            else:
                chunk[memory_id] = item
    cached, missing = kept.split(stored)
    chunk.update((item.id, item) for item in cached)
    if missing:
        if store is None:
            return None
        try:
            db = cast(aiosqlite.Connection, SyncConnection(_connection(stores, store)))
            chunk.update((item.id, item) for item in run_to_end(load_sketches(db, set(missing), kept)))
        except (sqlite3.Error, OSError, ValueError):
            _drop(stores, store)
            return None
    return chunk if stored <= chunk.keys() else None


def _connection(stores: dict[str, sqlite3.Connection], path: str) -> sqlite3.Connection:
    """The helper's read connection to the store at ``path``, kept from batch to batch (one store at
    a time: a backend's helper serves one store)."""
    connection = stores.get(path)
    if connection is None:
        for other in stores.values():
            other.close()
        stores.clear()
        connection = stores[path] = read_connection(path)
    return connection


def _drop(stores: dict[str, sqlite3.Connection], path: str) -> None:
    """Close the connection to ``path`` after an error (the next use opens another)."""
    dropped = stores.pop(path, None)
    if dropped is not None:
        dropped.close()


def _lookups(
    stores: dict[str, sqlite3.Connection], ahead: Ahead | None, contents: list[str]
) -> Iterator[list[int] | None]:
    """``lexicon.look_ahead`` of a batch on the helper's connection to its store (kept from batch to
    batch in ``stores``), then ``None`` for each memory it did not answer: no lookup was asked for,
    or the store could not be read (its connection is dropped)."""
    answered = 0
    if ahead is not None:
        try:
            for found in look_ahead(_connection(stores, ahead.path), ahead, contents):
                yield found
                answered += 1
        except (sqlite3.Error, OSError, ValueError):
            _drop(stores, ahead.path)
    for _ in range(answered, len(contents)):
        yield None


def frame(message: object) -> bytes:
    """One message as it goes down the pipe: its pickle's length (8 bytes, little-endian), then the
    pickle. Each side reads whole messages (:func:`read_frame`), so no unpickler reads ahead."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(8, "little") + data


def put(stream: IO[bytes], message: object) -> None:
    """Write one message (:func:`frame`)."""
    _write_frame(stream, frame(message))


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    # Straight to the descriptor, again for whatever the pipe did not take. Python's buffered writer
    # (3.11 here) garbles a write larger than the pipe holds when the process is stopped and continued
    # while it waits (Ctrl-Z then fg, a debugger, a sampling profiler): a frame then arrived whole in
    # length with the wrong bytes in it (tests/unit/test_sqlite_bulk.py stops a writer to show it).
    stream.flush()
    descriptor = stream.fileno()
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def get(stream: IO[bytes]) -> Any:
    """Read one message written by :func:`put`."""
    return pickle.loads(read_frame(stream))


def read_frame(stream: IO[bytes]) -> bytes:
    """The pickle of one message written by :func:`put`; ``EOFError`` at the end of the stream (or
    inside a message: the other side died while writing it)."""
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("the other side closed the pipe")
    size = int.from_bytes(header, "little")
    if size > MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes: not the planner's protocol")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed the pipe inside a message")
    return data


def main() -> None:
    """The helper process: plans from stdin to stdout (anything printed goes to stderr instead)."""
    sink = sys.stdout.buffer
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, sink)

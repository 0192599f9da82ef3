"""Shared text rules: tokens, content hashes, similarity, causal and negation cues, entity extraction.

Pure and standard-library only. Every backend and the domain use these same rules so that a memory
deduplicates, links and matches the same way whatever store holds it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

#: Context at index time: a backend's keyword index may also match each memory on the words of the
#: memories just before and after it in time, when another source wrote them at most this far apart
#: (the turns around a conversation turn; a note written days earlier is another topic) ...
CONTEXT_WINDOW = timedelta(hours=1)
#: ... weighed at this share of the memory's own words by BM25 (chosen on LoCoMo tuning
#: conversations: 0.3, 0.5 and 1.0 gave expanded recall@10 74.3, 75.7 and 74.6).
CONTEXT_WEIGHT = 0.5


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Common English words that carry no retrieval signal.
STOP_WORDS: frozenset[str] = _word_set(
    """
    a about after all also am an and any are as at be been before being but by can could did do does
    doing for from had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not of off on once only or other our ours out over own same she should so
    some such than that the their theirs them then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your yours
    """
)

_WORD_RUN = re.compile(r"[^\W_]+")
_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WHITESPACE = re.compile(r"\s+")


def _han_bigrams(run: str) -> list[str]:
    # Chinese has no spaces: overlapping bigrams are the usual cheap stand-in for word segmentation.
    if len(run) == 1:
        return [run]
    return [run[index : index + 2] for index in range(len(run) - 1)]


def tokenize(text: str) -> list[str]:
    """Lowercased letter/digit tokens of ``text`` in order, stop words dropped, Han runs as bigrams."""
    lowered = text.lower()
    if _HAN_RUN.search(lowered) is None:
        # most text has no Han run: its word runs are its tokens (~3x faster than looking for Han
        # in each run; every candidate of a query is tokenized once, every memory written)
        return [run for run in _WORD_RUN.findall(lowered) if run not in STOP_WORDS]
    tokens: list[str] = []
    for run in _WORD_RUN.findall(lowered):
        position = 0
        for han in _HAN_RUN.finditer(run):
            tokens.extend(_plain_tokens(run[position : han.start()]))
            tokens.extend(_han_bigrams(han.group()))
            position = han.end()
        tokens.extend(_plain_tokens(run[position:]))
    return tokens


def _plain_tokens(segment: str) -> list[str]:
    if not segment or segment in STOP_WORDS:
        return []
    return [segment]


def normalise_content(text: str) -> str:
    """Whitespace-collapsed, casefolded, stripped text: the form two 'identical' memories share."""
    return _WHITESPACE.sub(" ", text).strip().casefold()


def content_hash(text: str) -> str:
    """SHA-256 hex digest of :func:`normalise_content` (the exact-duplicate key)."""
    return hashlib.sha256(normalise_content(text).encode("utf-8")).hexdigest()


def jaccard(a_tokens: Iterable[str], b_tokens: Iterable[str]) -> float:
    """|A∩B| / |A∪B| of the two token sets; 0.0 when both are empty."""
    a, b = _as_set(a_tokens), _as_set(b_tokens)
    shared = len(a & b)
    union = len(a) + len(b) - shared
    return shared / union if union else 0.0


def _as_set(tokens: Iterable[str]) -> Set[str]:
    # Sets (most callers pass frozensets) are used as they are; other iterables are copied once. The
    # exact-type test comes first: an ABC isinstance check costs more than the set arithmetic itself
    # (millions of pairs in a bulk import).
    if type(tokens) is frozenset or type(tokens) is set:
        return tokens
    return tokens if isinstance(tokens, Set) else set(tokens)


def overlap(a_tokens: Iterable[str], b_tokens: Iterable[str]) -> float:
    """|A∩B| / max(|A|, |B|) of the two token sets; 0.0 when either is empty."""
    a, b = _as_set(a_tokens), _as_set(b_tokens)
    largest = max(len(a), len(b))
    return len(a & b) / largest if a and b else 0.0


_PREVENT_CUES = (
    r"prevents?|prevented|preventing|to avoid|avoids?|avoided|so as not to|blocks?|stops?\s+\w+\s+from"
)
_ENABLE_CUES = (
    r"enables?|enabled|allows?|allowed|lets|makes? it possible|so that|in order to|unblocks?|unblocked"
)
_CAUSE_CUES = (
    r"because|therefore|thus|hence|due to|caused by|causes?|caused|as a result|consequently|"
    r"decided to|chosen because|chose .{1,40}? because|the reason|reasons? (?:is|was|why)|"
    r"leads? to|led to|results? in|resulted in|since|so we|which is why|that is why|thanks to|owing to|"
    r"triggered|triggers?|broke|breaks"
)

#: Any wording that states a cause, a reason or a purpose.
CAUSAL_CUE = re.compile(rf"\b(?:{_PREVENT_CUES}|{_ENABLE_CUES}|{_CAUSE_CUES})\b", re.IGNORECASE)
_PREVENT = re.compile(rf"\b(?:{_PREVENT_CUES})\b", re.IGNORECASE)
_ENABLE = re.compile(rf"\b(?:{_ENABLE_CUES})\b", re.IGNORECASE)

#: Wording that says a previous fact no longer holds (a hint that a memory supersedes another).
NEGATION = re.compile(
    r"\b(?:no longer|not anymore|any ?more|don'?t|doesn'?t|didn'?t|do not|does not|never|"
    r"switched (?:from|away from|to)|moved (?:away )?from|migrated (?:away )?from|instead of|rather than|"
    r"replaced|replaces|replacing|deprecated|dropped|stopped using|abandoned|reverted|retired|"
    r"changed (?:from|to)|not use|won'?t|isn'?t|aren'?t|wasn'?t|cancelled|canceled)\b",
    re.IGNORECASE,
)


def has_causal_cue(text: str) -> bool:
    """True when ``text`` states a cause, reason or purpose."""
    return CAUSAL_CUE.search(text) is not None


def has_negation(text: str) -> bool:
    """True when ``text`` says something stopped, changed or was replaced."""
    return NEGATION.search(text) is not None


def causal_subtype(text: str) -> str | None:
    """``prevents``, ``enables`` or ``causes`` (in that precedence) for a causal text, else ``None``."""
    if _PREVENT.search(text):
        return "prevents"
    if _ENABLE.search(text):
        return "enables"
    if CAUSAL_CUE.search(text):
        return "causes"
    return None


# Uppercase words that are ordinary language, units or filler rather than names.
_ACRONYM_STOP: frozenset[str] = _word_set(
    """
    A I OK ID IDS AM PM UTC GMT FYI ASAP TODO TBD TBA ETA IMO IMHO BTW AFAIK NB PS RE FW FWD EOD EOW
    AND OR NOT THE FOR BUT YES NO IT IS IN ON AT TO OF BY WE US MY ME HE SHE NEW ALL ANY LOL WIP NA
    N/A MB GB KB TB MS
    """
)

# Capitalised words that start sentences and must not open a multi-word name.
_LEADING_FILLER: frozenset[str] = (
    _word_set(
        """
    yesterday today tomorrow then also however so but and or when after before since because
    monday tuesday wednesday thursday friday saturday sunday last next this that these those our
    my we i please note maybe
    """
    )
    | STOP_WORDS
)

_URL = re.compile(r"\bhttps?://[^\s<>\"'()\[\]]+", re.IGNORECASE)
_PATH = re.compile(
    r"(?<![\w/.:])(?:~|\.{1,2})?(?:/[\w.\-]+){2,}/?"
    r"|(?<![\w/.:])[\w.\-]+(?:/[\w.\-]+)+\.[A-Za-z0-9]{1,8}\b"
    r"|(?<![\w/.:-])[\w\-]+\.(?:py|js|ts|tsx|jsx|go|rs|java|rb|md|json|ya?ml|toml|ini|cfg|sql|sh|txt|csv|html|css|db)\b"
)
_MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9_][\w\-]*(?:\.[\w\-]+)*")
_QUOTED = re.compile(r"\"([^\"\n]{2,80})\"|“([^”\n]{2,80})”")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[a-z]+[A-Z][A-Za-z0-9]*)\b")
_ALL_CAPS = re.compile(r"\b[A-Z][A-Z0-9]{1,5}\b")
_MULTI_WORD = re.compile(r"\b[A-Z][a-z]+(?:[ \t]+(?:of|de|van|von|da|del)?[ \t]*[A-Z][a-z]+)+\b")
_TRAILING_PUNCTUATION = ".,;:!?"
#: Each pattern with strings one of which every match of it contains: a text holding none of them
#: cannot match it and skips running it (most texts have no URL, path, file name, mention or
#: quotation). A file name ends in one of _PATH's extensions (".js" covers .json and .jsx, ".ts" .tsx).
_FILE_ENDINGS = (
    ".py", ".js", ".ts", ".go", ".rs", ".java", ".rb", ".md", ".yaml", ".yml",
    ".toml", ".ini", ".cfg", ".sql", ".sh", ".txt", ".csv", ".html", ".css", ".db",
)  # fmt: skip
_SCANS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (_URL, ("://",)),
    (_PATH, ("/", *_FILE_ENDINGS)),
    (_MENTION, ("@",)),
)
_QUOTE_MARKS = ('"', "“")


def _holds_any(text: str, needles: tuple[str, ...]) -> bool:
    return any(needle in text for needle in needles)


def extract_entities(text: str, known: Sequence[str] = ()) -> tuple[str, ...]:
    """Names mentioned in ``text``, in order of appearance, deduplicated case-insensitively.

    Recognised: URLs, file paths, @mentions, quoted titles, capitalised multi-word names, CamelCase
    words, ALLCAPS acronyms of 2-6 characters (minus common filler), and any of ``known`` appearing
    as a whole word (case-insensitive; reported in the ``known`` spelling).
    """
    found: list[tuple[int, str]] = []
    claimed: list[tuple[int, int]] = []
    for pattern, needles in _SCANS:
        if not _holds_any(text, needles):
            continue
        for match in pattern.finditer(text):
            name = match.group().rstrip(_TRAILING_PUNCTUATION)
            if _free(claimed, match.start(), match.end()) and name:
                claimed.append((match.start(), match.end()))
                found.append((match.start(), name))
    quotations = _QUOTED.finditer(text) if _holds_any(text, _QUOTE_MARKS) else ()
    for match in quotations:
        title = (match.group(1) or match.group(2) or "").strip()
        if title and len(title.split()) <= 8 and _free(claimed, match.start(), match.end()):
            claimed.append((match.start(), match.end()))
            found.append((match.start(), title))
    found.extend(_word_shaped_names(text, claimed))
    names, spellings = _known_spellings(tuple(known)) if known else (frozenset(), {})
    found.extend(_known_names(text, names, spellings))
    return tuple(spellings.get(name.casefold(), name) for name in _ordered_unique(found))


def _word_shaped_names(text: str, claimed: list[tuple[int, int]]) -> list[tuple[int, str]]:
    names: list[tuple[int, str]] = []
    for match in _MULTI_WORD.finditer(text):
        words = match.group().split()
        start = match.start()
        while words and words[0].lower() in _LEADING_FILLER:
            start = text.index(words[1], start + len(words[0])) if len(words) > 1 else start
            words = words[1:]
        if len(words) >= 2 and _free(claimed, start, match.end()):
            names.append((start, " ".join(words)))
    for pattern in (_CAMEL, _ALL_CAPS):
        for match in pattern.finditer(text):
            word = match.group()
            if pattern is _ALL_CAPS and word in _ACRONYM_STOP:
                continue
            if _free(claimed, match.start(), match.end()):
                names.append((match.start(), word))
    return names


def _known_names(text: str, names: frozenset[str], spellings: Mapping[str, str]) -> list[tuple[int, str]]:
    # where the (casefolded) ``names`` occur in ``text``, each in its known spelling
    if not names:
        return []
    fast = _ascii_names(names) if text.isascii() else None
    spans = _ascii_spans(text, fast) if fast is not None else _regex_spans(text, names)
    return [(start, spellings.get(name.casefold(), name)) for start, name in spans]


@lru_cache(maxsize=16)
def _known_spellings(known: tuple[str, ...]) -> tuple[frozenset[str], dict[str, str]]:
    # the casefolded names and each one's first spelling
    spellings: dict[str, str] = {}
    for name in known:
        cleaned = name.strip()
        if cleaned:
            spellings.setdefault(cleaned.casefold(), cleaned)
    return frozenset(spellings), spellings


def _regex_spans(text: str, names: frozenset[str]) -> list[tuple[int, str]]:
    return [(match.start(), match.group()) for match in _names_pattern(names).finditer(text)]


#: The characters outside ASCII that ``re.IGNORECASE`` matches to an ASCII one (İ, ı, ſ, the Kelvin
#: sign): a name holding one is matched by the pattern (``tests/unit/test_text.py`` checks the list).
FOLDS_TO_ASCII = frozenset("\u0130\u0131\u017f\u212a")


@dataclass(frozen=True, slots=True)
class _AsciiNames:
    """The names an ASCII text can hold, by length (``lengths``: longest first), and their first
    characters."""

    lengths: tuple[int, ...]
    by_length: dict[int, frozenset[str]]
    starts: frozenset[str]


@lru_cache(maxsize=16)
def _ascii_names(names: frozenset[str]) -> _AsciiNames | None:
    """The names as :func:`_ascii_spans` reads them; ``None`` when one holds a character that
    ``re.IGNORECASE`` matches to an ASCII one (the pattern then decides). A name with any other
    character outside ASCII can never be in an ASCII text."""
    if any(char in FOLDS_TO_ASCII for name in names for char in name):
        return None
    by_length: dict[int, set[str]] = {}
    for name in names:
        if name.isascii():
            by_length.setdefault(len(name), set()).add(name)
    lengths = tuple(sorted(by_length, reverse=True))
    starts = frozenset(name[0] for group in by_length.values() for name in group)
    return _AsciiNames(lengths, {length: frozenset(group) for length, group in by_length.items()}, starts)


def _ascii_spans(text: str, names: _AsciiNames) -> list[tuple[int, str]]:
    """What ``_names_pattern(names).finditer(text)`` finds in an ASCII ``text`` (start, text), without
    compiling it (a store's known names change with nearly every write, and compiling hundreds of
    alternatives cost ~10 ms a write). The same scan: from each position not preceded by a word
    character, the longest name (ignoring case: names are casefolded, and an ASCII letter's casefold
    is its lower case) not followed by one; the next search starts after it."""
    lowered, spans, position = text.lower(), [], 0
    while position < len(text):
        stop = _name_end(text, lowered, position, names)
        if stop is None:
            position += 1
        else:
            spans.append((position, text[position:stop]))
            position = stop
    return spans


def _name_end(text: str, lowered: str, position: int, names: _AsciiNames) -> int | None:
    # where the longest name starting at ``position`` ends, if one does, as _ascii_spans reads it
    if lowered[position] not in names.starts or (position > 0 and _word_char(text[position - 1])):
        return None
    for length in names.lengths:
        stop = position + length
        if stop > len(text) or lowered[position:stop] not in names.by_length[length]:
            continue
        if stop == len(text) or not _word_char(text[stop]):
            return stop
    return None


def _word_char(char: str) -> bool:
    # re's \w for a str pattern: a letter or digit in Unicode's sense, or the underscore
    return char.isalnum() or char == "_"


@lru_cache(maxsize=16)
def _names_pattern(names: frozenset[str]) -> re.Pattern[str]:
    # One alternation for all names (longest first) is far cheaper than a regex per name. Keyed by the
    # set of names, not their order: a store's most-used names reorder with nearly every write, and
    # compiling a thousand alternatives costs tens of milliseconds. Names of equal length never
    # match the same span differently, so their order in the alternation does not matter.
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=lambda name: (-len(name), name)))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


_WORD_EDGE_PUNCTUATION = ".,;:!?()[]{}<>\"'`“”‘’"


def _name_words(text: str) -> list[str]:
    words = (word.strip(_WORD_EDGE_PUNCTUATION).casefold() for word in text.split())
    return [word for word in words if word]


def name_candidates(text: str, max_words: int = 4) -> set[str]:
    """Casefolded runs of 1 to ``max_words`` words of ``text``: the keys to look known names up by.

    A store can match its known entity names against these in one indexed lookup instead of running
    a pattern per name.
    """
    words = _name_words(text)
    return {
        " ".join(words[start : start + size])
        for size in range(1, max_words + 1)
        for start in range(len(words) - size + 1)
    }


def matched_names(text: str, known: Mapping[str, str], max_words: int = 4) -> list[str]:
    """Known names (``known`` maps casefolded name -> spelling) appearing in ``text`` as whole words.

    In order of first appearance, longest match first at each position; single stop words never match.
    """
    if not known:
        return []
    words = _name_words(text)
    # A name of n words has n - 1 spaces and starts with its first word: only the runs starting with
    # one of those words, and no longer than the longest name, can be one (a write's ``known`` holds
    # the few names its own text mentions, so most positions are skipped without joining any run).
    firsts = {name.partition(" ")[0] for name in known}
    longest = max(name.count(" ") for name in known) + 1
    found: dict[str, str] = {}
    for start, word in enumerate(words):
        if word not in firsts:
            continue
        for size in range(min(max_words, longest, len(words) - start), 0, -1):
            key = " ".join(words[start : start + size])
            if key in known and not (size == 1 and (key in STOP_WORDS or len(key) < 2)):
                found.setdefault(key, known[key])
    return list(found.values())


def _free(claimed: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= taken_start or start >= taken_end for taken_start, taken_end in claimed)


def _ordered_unique(found: list[tuple[int, str]]) -> tuple[str, ...]:
    seen: set[str] = set()
    names: list[str] = []
    for _, name in sorted(found, key=lambda item: item[0]):
        key = name.casefold()
        if key not in seen:
            seen.add(key)
            names.append(name)
    return tuple(names)

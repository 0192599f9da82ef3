"""The shared text rules: tokens, hashes, similarity, cues and entity extraction."""

from __future__ import annotations

import random
import re
import sys

from hypothesis import given
from hypothesis import strategies as st

from memory_orchestrator.ports import text as text_rules
from memory_orchestrator.ports.text import (
    STOP_WORDS,
    causal_subtype,
    content_hash,
    extract_entities,
    has_causal_cue,
    has_negation,
    jaccard,
    matched_names,
    name_candidates,
    normalise_content,
    overlap,
    tokenize,
)


def test_tokenize_lowercases_splits_and_drops_stop_words() -> None:
    assert tokenize("The Redis cache, and the DB-pool!") == ["redis", "cache", "db", "pool"]


def test_tokenize_keeps_digits_and_non_ascii_letters() -> None:
    assert tokenize("Café v2 über_alles") == ["café", "v2", "über", "alles"]


def test_tokenize_splits_han_runs_into_bigrams() -> None:
    assert tokenize("我们使用Redis") == ["我们", "们使", "使用", "redis"]
    assert tokenize("猫") == ["猫"]


def test_tokenize_of_only_stop_words_is_empty() -> None:
    assert tokenize("and the of it") == []


def test_normalise_content_collapses_whitespace_and_casefolds() -> None:
    assert normalise_content("  We  use\tPOSTGRES\n") == "we use postgres"


def test_content_hash_ignores_case_and_whitespace_only() -> None:
    assert content_hash("We use Postgres") == content_hash("  we   USE postgres ")
    assert content_hash("We use Postgres") != content_hash("We use Postgres.")
    assert len(content_hash("x")) == 64


def test_jaccard_and_overlap() -> None:
    assert jaccard(["a", "b"], ["b", "c"]) == 1 / 3
    assert jaccard([], []) == 0.0
    assert overlap(["a", "b"], ["b", "c", "d", "e"]) == 1 / 4
    assert overlap([], ["a"]) == 0.0
    assert overlap(["a", "a", "b"], ["a", "b"]) == 1.0


def test_causal_cues_are_detected() -> None:
    assert has_causal_cue("We chose Postgres because of JSONB support")
    assert has_causal_cue("The outage was caused by a full disk")
    assert has_causal_cue("As a result the deploy was rolled back")
    assert has_causal_cue("That led to a rewrite")
    assert not has_causal_cue("We use Postgres for storage")


def test_causal_subtype_precedence_prevents_over_enables_over_causes() -> None:
    assert causal_subtype("Rate limits prevent abuse, because bots exist, so that users stay") == "prevents"
    assert causal_subtype("The cache enables fast reads because disks are slow") == "enables"
    assert causal_subtype("The deploy failed because the disk was full") == "causes"
    assert causal_subtype("The sky is blue") is None


def test_negation_cues() -> None:
    assert has_negation("We no longer use MySQL")
    assert has_negation("Switched from MySQL to Postgres")
    assert has_negation("Use tabs instead of spaces")
    assert has_negation("The v1 API is deprecated")
    assert not has_negation("We use MySQL")


def test_extract_entities_finds_each_kind_in_order() -> None:
    text = (
        "Alice Smith asked @bob to fix src/api/client.py in the PostgreSQL AWS setup, see "
        'https://example.com/docs, and read "The Phoenix Project".'
    )
    assert extract_entities(text) == (
        "Alice Smith",
        "@bob",
        "src/api/client.py",
        "PostgreSQL",
        "AWS",
        "https://example.com/docs",
        "The Phoenix Project",
    )


def test_extract_entities_skips_filler_acronyms_and_sentence_starters() -> None:
    assert extract_entities("FYI the ETA is ASAP, OK?") == ()
    assert extract_entities("Yesterday Alice Smith came") == ("Alice Smith",)


def test_extract_entities_matches_known_names_as_whole_words() -> None:
    known = ("redis", "Go", "Node.js")
    assert extract_entities("we moved the REDIS cache to node.js", known) == ("redis", "Node.js")
    assert extract_entities("a good idea", known) == ()


def pattern_spans(text: str, known: tuple[str, ...]) -> list[tuple[int, str]]:
    """What the names' alternation finds (the way every text was read before the ASCII scan)."""
    names, spellings = text_rules._known_spellings(known)
    if not names:
        return []
    found = text_rules._names_pattern(names).finditer(text)
    return [(match.start(), spellings.get(match.group().casefold(), match.group())) for match in found]


def known_names(text: str, known: tuple[str, ...]) -> list[tuple[int, str]]:
    """What ``extract_entities`` finds of ``known`` in ``text`` (start, spelling)."""
    return text_rules._known_names(text, *text_rules._known_spellings(known))


def test_known_names_in_an_ascii_text_are_found_as_the_pattern_finds_them() -> None:
    # the scan without a compiled pattern: longest name first at each position not inside a word,
    # not followed by a word character, the next search after it; fuzzed against the pattern
    rng = random.Random(7)
    alphabet = "abcdABCD019_ -.,'@+"
    compared = 0
    for _ in range(4000):
        known = tuple(
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 10))
        )
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert known_names(text, known) == pattern_spans(text, known), (text, known)
        compared += bool(pattern_spans(text, known))
    assert compared > 500  # many cases found something
    known = ("Node", "node.js", "C++", "@bob", "New York", "York")
    text = "node.js and Node, c++ at @BOB in new york (york) nodes"
    assert (
        known_names(text, known)
        == pattern_spans(text, known)
        == [
            (0, "node.js"),
            (12, "Node"),
            (18, "C++"),
            (25, "@bob"),
            (33, "New York"),
            (43, "York"),
        ]
    )


def test_names_or_texts_beyond_ascii_take_the_pattern() -> None:
    # non-ASCII text; a name holding a character re.IGNORECASE matches to an ASCII one (dotless i,
    # long s, Kelvin sign, dotted capital I); a name with an accent, which no ASCII text holds
    cases = [
        ("Zoë met zoë", ("zoë",)),
        ("a tiny bit", ("t\u0131ny",)),
        ("the mask", ("ma\u017fk", "the")),
        ("KELVIN", ("\u212aelvin",)),
        ("a clean slate", ("caf\u00e9", "clean")),
    ]
    for text, known in cases:
        assert known_names(text, known) == pattern_spans(text, known), (text, known)
    assert known_names("a tiny bit", ("t\u0131ny",)) == [(2, "tiny")]  # the text's own spelling


def test_the_characters_folding_to_ascii_are_all_there_are() -> None:
    # every character outside ASCII that re.IGNORECASE matches to an ASCII one (only characters with
    # a case mapping can)
    ascii_text = "".join(map(chr, range(128)))
    found = set()
    for point in range(128, sys.maxunicode + 1):
        char = chr(point)
        if 0xD800 <= point <= 0xDFFF or char.lower() == char.upper() == char.casefold() == char:
            continue
        if re.search(re.escape(char), ascii_text, re.IGNORECASE):
            found.add(char)
    assert found == text_rules.FOLDS_TO_ASCII


def test_extract_entities_deduplicates_case_insensitively_preferring_known_spelling() -> None:
    assert extract_entities("GraphQL and graphql and GraphQL") == ("GraphQL",)
    assert extract_entities("GraphQL and graphql", ("graphql",)) == ("graphql",)


def test_extract_entities_does_not_split_paths_or_urls() -> None:
    assert extract_entities("edit /etc/nginx/NginxConf.conf now") == ("/etc/nginx/NginxConf.conf",)


def test_name_candidates_are_word_runs_without_edge_punctuation() -> None:
    assert name_candidates("Use Node.js, (now)!", max_words=2) == {
        "use",
        "node.js",
        "now",
        "use node.js",
        "node.js now",
    }


def test_matched_names_prefers_longest_and_keeps_order() -> None:
    known = {"alice smith": "Alice Smith", "alice": "Alice", "kafka": "Kafka", "it": "IT"}
    assert matched_names("kafka broke; alice smith and Alice fixed it", known) == [
        "Kafka",
        "Alice Smith",
        "Alice",
    ]


_WORDS = st.sampled_from(["alice", "smith", "kafka", "it", "the", "a", "bank", "of", "america", "x"])


@given(
    st.lists(_WORDS, max_size=30),
    st.sets(st.lists(_WORDS, min_size=1, max_size=5).map(" ".join), max_size=6),
)
def test_matched_names_finds_what_every_run_of_words_would(words: list[str], names: set[str]) -> None:
    # the reference: every run of up to four words at every position, longest first, none skipped
    known = {name: name.title() for name in names}
    expected: dict[str, str] = {}
    for start in range(len(words)):
        for size in range(min(4, len(words) - start), 0, -1):
            key = " ".join(words[start : start + size])
            if key in known and not (size == 1 and (key in STOP_WORDS or len(key) < 2)):
                expected.setdefault(key, known[key])
    assert matched_names(" ".join(words), known) == list(expected.values())


def test_a_sentence_opening_verb_does_not_make_a_name() -> None:
    assert extract_entities("Raise the Postgres pool when traffic doubles") == ()
    assert extract_entities("Bank of America approved it") == ("Bank of America",)


@given(st.text(max_size=200))
def test_tokens_are_never_empty_or_stop_words(text: str) -> None:
    for token in tokenize(text):
        assert token and token not in STOP_WORDS
        assert token == token.lower()


@given(st.text(max_size=200))
def test_text_without_han_tokenizes_as_the_han_splitting_path_does(text: str) -> None:
    # a Han character at the end sends the text down the path that looks for Han in every word run
    assert tokenize(text) == tokenize(f"{text} 猫")[:-1]


@given(
    st.lists(st.sampled_from(["We", "use", "POSTGRES", "ß", "İ"]), min_size=1),
    st.sampled_from([" ", "\t", "\n "]),
)
def test_content_hash_ignores_whitespace_runs_and_case(words: list[str], gap: str) -> None:
    assert content_hash(gap.join(words)) == content_hash(" ".join(word.casefold() for word in words))


# Pieces that make URLs, paths, file names, mentions and quotations, and near misses of them.
_PIECES = st.sampled_from(
    ["/", "//", "://", "http", "https", "~", ".", "..", "@", "a", "Ab", "_", "-", ":", " ", "\n", '"', "“",
     "”", "etc", "x1", "py", "js", "json", "tsx", "yaml", "yml", "sh", "db", "md", "conf", "é", "'"]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=30).map("".join) | st.text(max_size=80))
def test_a_pattern_skipped_for_lack_of_its_needles_could_not_have_matched(text: str) -> None:
    # extract_entities runs these patterns only on texts holding one of their needles
    for pattern, needles in (*text_rules._SCANS, (text_rules._QUOTED, text_rules._QUOTE_MARKS)):
        if pattern.search(text) is not None:
            assert text_rules._holds_any(text, needles), (pattern.pattern, text)


def test_every_file_extension_the_path_pattern_knows_has_a_needle() -> None:
    # the extensions of _PATH's last alternative, as its source spells them out
    source = text_rules._PATH.pattern
    spelled = source[source.rindex("(?:") + 3 : source.rindex(")")].split("|")
    assert "ya?ml" in spelled and "py" in spelled and "db" in spelled
    for extension in [e for e in spelled if e != "ya?ml"] + ["yaml", "yml"]:
        name = f"notes.{extension}"
        assert text_rules._PATH.search(name) is not None, extension
        assert text_rules._holds_any(name, dict(text_rules._SCANS)[text_rules._PATH]), extension

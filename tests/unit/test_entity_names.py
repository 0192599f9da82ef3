"""Requested entity names resolved against known names: prefix by whole words, case, initials."""

from __future__ import annotations

from memory_orchestrator.domain.entity_names import closest_names, resolve_names

KNOWN = ["Stratus Hosting", "Atlas", "Atlas Migration", "Nimbus Cloud", "SH", "Stratosphere"]


def test_whole_word_prefixes_match_in_any_case() -> None:
    resolution = resolve_names(["stratus", "ATLAS"], KNOWN)
    assert resolution.matched == {"stratus": ("Stratus Hosting",), "ATLAS": ("Atlas", "Atlas Migration")}
    assert resolution.names == ("stratus", "Stratus Hosting", "ATLAS", "Atlas Migration")
    assert resolution.unmatched == {}


def test_a_part_of_a_word_is_no_match_and_gets_the_closest_names() -> None:
    resolution = resolve_names(["Strat"], KNOWN)
    assert resolution.matched == {}
    assert resolution.names == ("Strat",)  # kept as given: it may exist beyond the known list
    assert resolution.unmatched["Strat"][:2] == ("Stratus Hosting", "Stratosphere")
    [warning] = resolution.warnings("filters.entities")
    assert warning == (
        'filters.entities: "Strat" matches no known entity; closest known: Stratus Hosting, Stratosphere'
    )


def test_initials_are_an_alias_only_when_no_name_matches_otherwise() -> None:
    assert resolve_names(["NC"], KNOWN).matched == {"NC": ("Nimbus Cloud",)}
    assert resolve_names(["SH"], KNOWN).matched == {"SH": ("SH",)}  # the store knows "SH" itself
    assert resolve_names(["SH"], ["Stratus Hosting"]).matched == {"SH": ("Stratus Hosting",)}
    assert resolve_names(["nc"], KNOWN).unmatched  # lower case is a word, not initials
    assert resolve_names(["AMX"], KNOWN).unmatched  # three letters need three words


def test_nothing_close_is_said_plainly() -> None:
    resolution = resolve_names(["Zebra"], KNOWN)
    assert resolution.warnings("seed_entities") == [
        'seed_entities: "Zebra" matches no known entity; no known entity is close'
    ]
    assert closest_names("atlass", KNOWN)[0] == "Atlas"

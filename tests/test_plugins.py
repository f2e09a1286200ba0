"""The plugin registry drivers and transports share: names, parts, errors, lazy imports."""

from __future__ import annotations

import pytest

from controller.plugins import Registry


class Wrong(Exception):
    pass


REGISTRY = Registry("pokdeng_table.test_nothing_registered",
                    {"od": "collections:OrderedDict;collections:Counter",
                     "path": "pathlib:PurePosixPath"},
                    noun="gadget", error=Wrong)


def test_builtin_names_and_their_parts_load() -> None:
    import collections

    assert sorted(REGISTRY.available()) == ["od", "path"]
    assert REGISTRY.load("od") is collections.OrderedDict
    assert REGISTRY.load("od", 1) is collections.Counter
    assert REGISTRY.load("od", base=dict) is collections.OrderedDict


def test_an_unknown_name_and_a_wrong_class_raise_the_registrys_error() -> None:
    with pytest.raises(Wrong, match=r"unknown gadget 'nope'; known: od, path"):
        REGISTRY.load("nope")
    with pytest.raises(Wrong, match=r"gadget 'path' \(pathlib:PurePosixPath\) is not a dict"):
        REGISTRY.load("path", base=dict)

"""The config file's YAML, read so that no file can trick the reader.

``yaml.safe_load`` refuses ``!!python/…`` tags, but it lets the last of two equal keys win
silently, expands aliases (a few hundred bytes of "billion laughs" become a billion values),
fails deep inside Python on a 5,000-digit number or ``0x_``, and has no limit on size or
nesting. This reader instead:

- reads at most ``MAX_BYTES`` of the file (a table config is a few KiB), and UTF-8 only;
- refuses explicit tags (``!!python/object``, ``!!binary``, …), anchors and aliases, nesting
  deeper than ``MAX_DEPTH`` and more than ``MAX_VALUES`` values, at the first one, by line;
- reports every key given twice, at any level, by key path with both lines;
- refuses numbers longer than ``MAX_NUMBER_CHARS`` and values YAML cannot build, by key path;
- keeps every key as the text the file wrote (``yes:`` is "yes", ``<<:`` is a plain key), so
  messages name the key the file used.

Every problem raises ``YamlProblems`` listing plain-text messages; nothing else escapes.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.events import AliasEvent, NodeEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_VALUES = 10_000
MAX_NUMBER_CHARS = 32
NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


class YamlProblems(Exception):
    """The file cannot be read as a config's YAML; ``problems`` lists why, one message each."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


class _Refused(yaml.MarkedYAMLError):
    """Something YAML allows but a config file must not use."""

    def __init__(self, problem: str, event: Any):
        super().__init__(problem=problem, problem_mark=event.start_mark)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader's parser and scalar constructors, with the composition bounded."""

    def __init__(self, text: str):
        super().__init__(text)
        self._depth = 0
        self._values = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # a node comes next (an alias, a scalar, a sequence or a mapping); PyYAML's stubs leave
        # the parser's event methods unannotated
        event: NodeEvent = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent) or event.anchor is not None:
            raise _Refused(f"anchors and aliases (&{event.anchor}, *{event.anchor}) are not "
                           f"allowed in a config: write each value out", event)
        tag = getattr(event, "tag", None)  # scalars and collections have one, aliases not
        if tag not in (None, "!"):
            raise _Refused(f"YAML tags ({tag}) are not allowed in a config", event)
        self._values += 1
        if self._values > MAX_VALUES:
            raise _Refused(f"more than {MAX_VALUES} values: this is not a table config", event)
        if self._depth >= MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def build(self, node: Node, path: str, problems: list[str]) -> Any:
        """The Python value of ``node``, each problem recorded under its key path."""
        if isinstance(node, MappingNode):
            return self._build_mapping(node, path, problems)
        if isinstance(node, SequenceNode):
            return [self.build(item, f"{path}[{i}]", problems)
                    for i, item in enumerate(node.value)]
        if node.tag in NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
            problems.append(f"{path or 'top level'}: a number of {len(node.value)} characters; "
                            f"at most {MAX_NUMBER_CHARS} are accepted")
            return None
        try:
            return self.construct_object(node)
        except (ValueError, yaml.YAMLError) as exc:  # 0x_, a 13th month, a bare "="
            problems.append(f"{path or 'top level'}: YAML cannot read this value (line "
                            f"{node.start_mark.line + 1}): {getattr(exc, 'problem', None) or exc}")
            return None

    def _build_mapping(self, node: MappingNode, path: str, problems: list[str]) -> dict[str, Any]:
        built: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                problems.append(f"{path or 'top level'}: option names must be text, got a "
                                f"{'list' if isinstance(key_node, SequenceNode) else 'mapping'} "
                                f"(line {line})")
                continue
            key = key_node.value
            key_path = f"{path}.{key}" if path else key
            if key in first_line:
                problems.append(f"{key_path}: given twice, on lines {first_line[key]} and {line} "
                                f"(YAML would silently keep the second)")
            first_line.setdefault(key, line)
            built[key] = self.build(value_node, key_path, problems)
        return built


def load_yaml(text: str) -> Any:
    """The document in ``text``; raise YamlProblems listing what is wrong with it."""
    try:
        loader = _StrictLoader(text)  # refuses control characters before anything else
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise YamlProblems([f"YAML: line {line}: character #x{exc.character:04x} is not "
                            f"allowed"]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problems: list[str] = []
        data = loader.build(node, "", problems)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        kind = "YAML" if isinstance(exc, _Refused) else "YAML syntax error"
        raise YamlProblems([f"{kind}: {where}{problem}"]) from None
    finally:
        loader.dispose()
    if problems:
        raise YamlProblems(problems)
    return data


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """The YAML document in the file at ``path``, read within ``MAX_BYTES``."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise YamlProblems([f"cannot read the config file: {exc.strerror or exc}"]) from None
    if len(raw) > MAX_BYTES:
        raise YamlProblems([f"the file is larger than {MAX_BYTES // 1024} KiB; a table config "
                            f"is a few KiB (is this the right file?)"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlProblems([f"not UTF-8 text: {exc.reason} at byte {exc.start}"]) from None
    return load_yaml(text)

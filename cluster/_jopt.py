"""A jopt-simple style option parser, for the admin commands that mimic Kafka's tools.

Kafka's command-line tools parse with jopt-simple: ``--name value``, ``--name=value``,
one or two dashes, unambiguous abbreviations of long names, and words that are not
options ignored. ``parse`` does the same over a table of ``Option`` specs; a parse error
is an ``OptionError`` with jopt's message. (``cluster.topics_cli`` has its own copy, tied
to TopicCommand's options.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import KemuError

__all__ = ["Option", "OptionError", "Options", "parse"]


class OptionError(KemuError):
    """The command line does not parse (jopt-simple's ``OptionException``)."""


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    description: str
    argument: str | None = None
    """What the option's value is (jopt's ``describedAs``); None for a flag."""

    def __str__(self) -> str:  # jopt's OptionSpec.toString, as Kafka's messages show it
        return f"[{self.name}]"


@dataclass(frozen=True)
class Options:
    """A parsed command line: the values of each option given, in order (a flag has one
    empty value per occurrence)."""

    values: Mapping[str, tuple[str, ...]]

    def has(self, name: str) -> bool:
        return name in self.values

    def value(self, name: str) -> str | None:
        """``OptionSet.valueOf``: the option's only value, or None if absent."""
        given = self.values.get(name)
        if not given:
            return None
        if len(given) > 1:
            raise OptionError(
                f"Found multiple arguments for option {name}, but you asked for only one"
            )
        return given[0]

    def int_value(self, name: str) -> int | None:
        """The value as a Java ``Integer`` (``ofType(Integer)``)."""
        text = self.value(name)
        if text is None:
            return None
        number = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
        if number is None or not -(2**31) <= number < 2**31:
            raise OptionError(f"Cannot parse argument '{text}' of option {name}")
        return number


def parse(argv: Sequence[str], specs: Sequence[Option]) -> Options:
    by_name = {spec.name: spec for spec in specs}
    values: dict[str, list[str]] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            continue
        body = word[2:] if word.startswith("--") else word[1:]
        name, equals, inline = body.partition("=")
        spec = by_name.get(name)
        if spec is None:
            matches = [s for s in specs if s.name.startswith(name)] if name else []
            spec = matches[0] if len(matches) == 1 else None
        if spec is None:
            raise OptionError(f"{name} is not a recognized option")
        if spec.argument is None:
            if equals:
                raise OptionError(f"Option {spec.name} does not take an argument")
            values.setdefault(spec.name, []).append("")
        elif equals:
            values.setdefault(spec.name, []).append(inline)
        elif i < len(args):
            values.setdefault(spec.name, []).append(args[i])
            i += 1
        else:
            raise OptionError(f"Option {spec.name} requires an argument")
    return Options({k: tuple(v) for k, v in values.items()})

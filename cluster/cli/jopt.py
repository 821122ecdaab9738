"""A jopt-simple style option parser, for the admin commands that mimic Kafka's tools.

Kafka's command-line tools parse with jopt-simple: ``--name value``, ``--name=value``,
one or two dashes, unambiguous abbreviations of long names, a value that may be left out
(``withOptionalArg``), and words that are not options ignored. ``parse`` does the same
over a table of ``Option`` specs; a parse error is an ``OptionError`` with jopt's message,
and so is asking ``Options`` for one value of an option given twice or for a number that
is not one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cluster.cli.args import UsageError
from protocol.jvm import java_list_hash

__all__ = [
    "Option",
    "OptionError",
    "Options",
    "java_parse_int",
    "java_parse_long",
    "option_lines",
    "parse",
]


class OptionError(UsageError):
    """The command line does not parse (jopt-simple's ``OptionException``): its message
    alone, without the usage."""


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    description: str
    argument: str | None = None
    """What the option's value is (jopt's ``describedAs``); None for a flag."""
    optional: bool = False
    """The value may be left out (jopt's ``withOptionalArg``): the next word is taken only
    if it is not an option; without one the option's value is the empty string."""

    def __str__(self) -> str:  # jopt's OptionSpec.toString, as Kafka's messages show it
        return f"[{self.name}]"

    @property
    def hash(self) -> int:  # AbstractOptionSpec.hashCode: its names' List.hashCode
        return java_list_hash([self.name])


@dataclass(frozen=True)
class Options:
    """A parsed command line: the values of each option given, in order (a flag has one
    empty value per occurrence), and how many words the command line had."""

    values: Mapping[str, tuple[str, ...]]
    arg_count: int = 0

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

    def values_of(self, name: str) -> tuple[str, ...]:
        """``OptionSet.valuesOf``: every value given, in order."""
        return self.values.get(name, ())

    def int_value(self, name: str) -> int | None:
        """The value as a Java ``Integer`` (``ofType(Integer)``)."""
        return self._number(name, java_parse_int)

    def long_value(self, name: str) -> int | None:
        """The value as a Java ``Long`` (``ofType(Long)``)."""
        return self._number(name, java_parse_long)

    def _number(self, name: str, parse: Callable[[str], int | None]) -> int | None:
        text = self.value(name)
        if text is None:
            return None
        number = parse(text)
        if number is None:
            raise OptionError(f"Cannot parse argument '{text}' of option {name}")
        return number


def java_parse_int(text: str) -> int | None:
    """``Integer.parseInt``: optional sign, ASCII digits, 32-bit range; None otherwise."""
    return _java_parse(text, 32)


def java_parse_long(text: str) -> int | None:
    """``Long.parseLong``: optional sign, ASCII digits, 64-bit range; None otherwise."""
    return _java_parse(text, 64)


def _java_parse(text: str, bits: int) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None


def parse(argv: Sequence[str], specs: Sequence[Option]) -> Options:
    by_name = {spec.name: spec for spec in specs}
    values: dict[str, list[str]] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            break  # everything after is a non-option argument, which the tools ignore
        if not word.startswith("-") or word == "-":
            continue
        body = word[2:] if word.startswith("--") else word[1:]
        name, equals, inline = body.partition("=")
        spec = by_name.get(name)
        if spec is None:  # an unambiguous abbreviation (jopt's AbbreviationMap)
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
        elif spec.optional and (i == len(args) or args[i].startswith("-")):
            values.setdefault(spec.name, []).append("")
        elif i < len(args):
            values.setdefault(spec.name, []).append(args[i])
            i += 1
        else:
            raise OptionError(f"Option {spec.name} requires an argument")
    return Options({k: tuple(v) for k, v in values.items()}, len(args))


def option_lines(specs: Sequence[Option]) -> list[str]:
    """One line per option, by name: ``--name <argument>`` then its description, aligned
    in one column (kemu's plain layout, not jopt's table)."""
    width = max(len(s.name) + (len(s.argument) + 3 if s.argument else 0) for s in specs) + 4
    lines = []
    for spec in sorted(specs, key=lambda s: s.name):
        value = f"[{spec.argument}]" if spec.optional else f"<{spec.argument}>"
        left = f"--{spec.name}" + (f" {value}" if spec.argument else "")
        lines.append(f"{left:<{width}}{spec.description}")
    return lines

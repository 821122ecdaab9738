"""How the JVM collections and types Kafka uses print and order themselves.

Several of Kafka's error messages embed a Scala collection (``Set(...).mkString``, a
``mutable.HashMap``'s ``toString``) or a ``java.lang.Double``. For the messages to match
byte for byte, this module reproduces those orders and renderings for the few shapes the
admin messages use: integer sets and maps, doubles, and ``String`` length and trimming.
(``protocol.zkdata`` does the same for the string-keyed maps of ZooKeeper payloads.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from protocol.jvm import scala_champ_order
from protocol.jvm import signed32 as _signed32

_MASK32 = 0xFFFFFFFF


def scala_immutable_order(items: Sequence[int]) -> list[int]:
    """Iteration order of a Scala 2.13 ``immutable.Set``/``Map`` of ``Int`` built from
    ``items`` (distinct, in insertion order).

    Up to four elements it is a ``Set1``..``Set4`` (``Map1``..``Map4``): insertion order.
    From five it is a CHAMP trie, which is canonical (its shape depends only on its
    contents): a node yields its own entries by 5-bit slice of the improved hash, then
    descends into its sub-nodes by slice. Distinct ``Int``s never share an improved hash.
    """
    return list(items) if len(items) <= 4 else _champ_order(items)


def _champ_order(items: Sequence[int]) -> list[int]:
    """Iteration order of a Scala 2.13 CHAMP ``HashSet``/``HashMap`` of ``Int``, whatever
    its size (an ``Int``'s ``hashCode`` is itself)."""
    return scala_champ_order(items, items)


def scala_set_after_removal(items: Sequence[int], removed: Iterable[int]) -> list[int]:
    """Order of ``items.toSet -- removed`` (``items`` distinct, in insertion order).

    A ``Set4`` or smaller stays insertion-ordered when elements are removed; a ``HashSet``
    (five or more before the removal) stays a ``HashSet`` and so is CHAMP-ordered.
    """
    gone = set(removed)
    kept = [item for item in items if item not in gone]
    return kept if len(items) <= 4 else _champ_order(kept)


def scala_mutable_hash_map_order(keys: Sequence[int]) -> list[int]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap[Int, _]`` (initial capacity 16)
    after inserting ``keys`` (distinct): by bucket at the final table size, then by
    improved hash (``h ^ (h >>> 16)``, signed) within a bucket, then by insertion."""
    table, threshold = 16, 12
    for size in range(len(keys)):
        if size + 1 >= threshold:  # put0 grows the table before inserting
            table *= 2
            threshold = int(table * 0.75)
    hashes = [_signed32(k ^ ((k & _MASK32) >> 16)) for k in keys]
    ranked = sorted(range(len(keys)), key=lambda i: (hashes[i] & (table - 1), hashes[i], i))
    return [keys[i] for i in ranked]


def scala_hash_map_string(assignment: Mapping[int, Sequence[int]]) -> str:
    """``toString`` of the ``mutable.HashMap[Int, ArrayBuffer[Int]]`` that Kafka's
    CreateTopics handler builds from a manual assignment."""
    entries = (
        f"{p} -> ArrayBuffer({', '.join(map(str, assignment[p]))})"
        for p in scala_mutable_hash_map_order(list(assignment))
    )
    return f"HashMap({', '.join(entries)})"


def java_double(value: float) -> str:
    """``java.lang.Double.toString``: plain notation for 1e-3 <= |x| < 1e7 (always with a
    fractional digit), else ``d.dddE±n``, with the shortest digits that round-trip. The
    JDKs Kafka 2.7 runs on print a few values with more digits (1e23 as
    ``9.999999999999999E22``); values a config holds are not among them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent) + len(digits) - 1  # of the first digit
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units, so characters outside the BMP count twice."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


_JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """``String.trim()``: strips every character up to U+0020 from both ends (control
    characters included, Unicode spaces not)."""
    return text.strip(_JAVA_TRIMMED)


def java_equals_ignore_case(a: str, b: str) -> bool:
    """``String.equalsIgnoreCase``: equal length, and each pair of chars equal, or equal
    after ``toUpperCase``, or after ``toLowerCase`` (per character, so U+017F, the long s,
    matches 's')."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        ux, uy = _char_upper(x), _char_upper(y)
        if ux != uy and _char_lower(ux) != _char_lower(uy):
            return False
    return True


def _char_upper(char: str) -> str:
    """``Character.toUpperCase(char)``: only one-character mappings apply."""
    upper = char.upper()
    return upper if len(upper) == 1 else char


def _char_lower(char: str) -> str:
    lower = char.lower()
    return lower if len(lower) == 1 else char


def utf16_sort_key(text: str) -> bytes:
    """Sort key that orders strings as ``String.compareTo`` does (by UTF-16 code unit)."""
    return text.encode("utf-16-be", "surrogatepass")

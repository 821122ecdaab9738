"""What Kafka's command-line tools log, as patterns the tests read back."""

from __future__ import annotations

import re
from typing import Final

LOGGED_ERROR: Final = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ERROR Error when sending message to topic "
    r"(?P<topic>\S+) with key: (?P<key>null|\d+ bytes), value: (?P<value>\d+ bytes) with "
    r"error: \(org\.apache\.kafka\.clients\.producer\.internals\.ErrorLoggingCallback\)\n"
    r"(?P<exception>.*)\n"
)
"""A send the console producer's ``ErrorLoggingCallback`` logs through the tools' log4j
layout, the producer's exception on the next line."""

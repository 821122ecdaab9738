"""The ``kemu`` command line: every command and its argument parsing."""

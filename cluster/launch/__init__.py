"""Putting a cluster together: in one process, as broker processes, and reaching it from another."""

"""kemu."""

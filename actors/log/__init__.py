"""A broker's logs on disk: the log manager and the filesystem it sees."""

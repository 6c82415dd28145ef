"""The write door: atomic, durable file writes, the symlink rule every write keeps, and the
errors of a disk that refuses. No domain knowledge; everything that writes a file uses it."""

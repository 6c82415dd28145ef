"""A ticket's files: the store (atomic writes, the journal, the lock), redaction, ticket ids."""

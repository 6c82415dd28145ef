"""The tk format: ticket files read and edited as tk does, the whole backlog as tk's awk
reads it, and tk's ready/blocked/show selection."""

"""`tf-fsm ralph`: the backlog loop, its worker processes, `progress.md` and its live view."""

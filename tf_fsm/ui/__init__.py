"""`tf-fsm ui`: the live web board of the backlog (docs/ui.md)."""

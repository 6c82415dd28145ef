"""Read-only views: `status`, `run --plan`, a ticket's path and the lifecycle diagrams,
`doctor`, and the live progress line."""

"""One ticket's run: the orchestrator, an attempt's phases, the quality-gate commands, the
prompts and the chain context, usage and the budget. `api` holds its public types."""

"""The names of the files in a ticket's directory that the store keeps itself (TicketStore's
layout, pi-ticketflow's names). Code outside tf_fsm.storage that must tell them apart from
artifacts (a watcher of the directory, the board's change probe) takes the names from here."""

from __future__ import annotations

RETRY_STATE = "retry-state.json"
JOURNAL = "events.jsonl"
#: the chain context: the view agents are told (`TF_CHAIN_CONTEXT`), an artifact of this name
CHAIN_CONTEXT = "chain-context.json"
LOCK, LOCK_OWNER = ".lock", ".lock.owner"
#: what a run (ours or another process's) rewrites as it works: a watcher re-reads the
#: ticket's state on them, never acts on them
RUN_RECORDS = (JOURNAL, RETRY_STATE)

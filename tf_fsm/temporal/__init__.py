"""The backlog on a Temporal cluster: one workflow per ticket, its attempts run as activities
by workers on any host (docs/many-hosts.md). Needs the `temporal` extra
(`pip install 'tf-fsm[temporal]'`); nothing else in tf_fsm imports this package."""

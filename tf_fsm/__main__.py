from tf_fsm.cli import entry

raise SystemExit(entry())

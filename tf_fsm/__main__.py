from tf_fsm.cli.main import entry

raise SystemExit(entry())

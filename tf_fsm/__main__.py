from tf_fsm.cli import main

raise SystemExit(main())

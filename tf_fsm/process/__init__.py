"""The one door through which tf_fsm starts a process, its bounded output, and the processes
a child leaves behind."""

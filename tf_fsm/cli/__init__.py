"""The command line: the argument parser, the commands, and the one place errors become exit
codes."""

"""tf_fsm: drive AI coding agents over a tk ticket backlog with an explicit state machine."""

__version__ = "0.1.0"

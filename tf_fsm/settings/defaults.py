"""Package defaults that modules without pydantic need too: finding the project
(tf_fsm.settings.project) and the schema (tf_fsm.settings.schema) share them from here, so that
the schema, which the pure core imports, imports nothing that reads files."""

from __future__ import annotations

#: `workflow.knowledgeDir`'s package default (tf_fsm.settings.schema.PACKAGE_DEFAULTS uses it)
DEFAULT_KNOWLEDGE_DIR = ".tf/knowledge"
#: the environment variable that stands for `--temporal HOST:PORT` (tf_fsm.settings.temporal)
TEMPORAL_ENV = "TF_FSM_TEMPORAL"

#!/bin/sh
# The agent of bench_parallel.py: a real process per phase that sleeps (an agent's own time,
# mostly waiting on a model) and writes a clean report for the phase, so every ticket closes
# in one attempt. sh + sleep + printf: next to no CPU, so the benchmark measures tf_fsm.
cat >/dev/null  # the prompt arrives on stdin
sleep "${SLEEPY_AGENT_SECONDS:-0.05}"
stats='## Summary Statistics\n- Critical: 0\n- Major: 0\n- Minor: 0\n- Warnings: 0\n- Suggestions: 0\n'
case "$TF_PHASE" in
  review|verify) printf "# Review: %s\n\nNo issues found.\n\n$stats" "$TF_TICKET_ID" ;;
  fix) printf "# Fixes: %s\n\n## Fixes Applied\n- No fixes applied.\n\n$stats" "$TF_TICKET_ID" ;;
  *) printf '# %s: %s\n\nDone.\n' "$TF_PHASE" "$TF_TICKET_ID" ;;
esac >"$TF_OUTPUT"
if [ -n "$SLEEPY_AGENT_LOG" ]; then echo "$TF_TICKET_ID $TF_PHASE" >>"$SLEEPY_AGENT_LOG"; fi

"""Settings: `.tf/config/settings.json` in pi-ticketflow's format, loaded strictly over tf_fsm's
package defaults, and the project root. `project` answers without pydantic (start-up)."""

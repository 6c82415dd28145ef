"""The Store conformance suite (tf_fsm.storage.protocol): what every store must do. A backend's
test module runs it with `from tf_fsm.conformance.store import *` and a `backend` fixture
(tf_fsm.conformance's docstring shows how).

Only the protocol's members are used, and the records are reached around the store only
through the backend's `raw` (damaged as a crash, a person or an agent would) and `snapshot`
(everything kept: a read must leave it equal). Promises about files on disk or about a second
process are skipped, with the reason, for a store whose `capabilities` lack them
(`fixtures.needs`). TicketStore's own details (file layout, the lock's owner note, fsync
grouping) are tested in tests/test_store.py and tests/test_durability.py.
"""

from __future__ import annotations

from tf_fsm.conformance.fixtures import (
    holders,
    make,
    raw,
    root,
    snapshot,
    spec,
    store,
)
from tf_fsm.conformance.store_files import (
    test_a_bad_ticket_id_is_refused_before_anything_is_kept,
    test_a_symlink_out_of_the_ticket_directory_is_refused,
    test_a_symlink_that_stays_inside_the_ticket_directory_is_allowed,
    test_a_write_that_fails_midway_leaves_the_old_content_and_no_temp_file,
    test_an_agents_file_is_redacted_in_place_and_taken,
    test_an_artifact_file_is_replaced_atomically,
    test_an_artifact_is_replaced_and_left_alone_when_unchanged,
    test_an_artifact_that_is_itself_a_symlink_out_is_refused,
    test_artifact_names_that_could_escape_or_clobber_are_refused,
    test_artifacts_are_redacted_and_read_leniently,
    test_artifacts_round_trip,
    test_check_paths_refuses_links_out_and_a_linked_journal,
    test_reads_never_write,
    test_the_chain_context_is_the_artifact_of_that_name,
)
from tf_fsm.conformance.store_lock import (
    test_the_lock_is_exclusive_across_processes,
    test_the_lock_is_free_once_the_holder_releases_it_or_is_sigkilled,
    test_the_lock_is_not_reentrant_within_a_process,
    test_the_lock_is_released_when_the_body_raises,
    test_the_lock_survives_deletion_of_the_tickets_files,
)
from tf_fsm.conformance.store_records import (
    test_a_journal_that_is_only_a_torn_tail_is_repaired,
    test_another_tickets_state_or_event_is_refused,
    test_append_refuses_to_cut_a_complete_but_invalid_last_line,
    test_corrupt_middle_line_is_a_corrupt_state_error_and_is_not_touched,
    test_corrupt_retry_state_raises_and_is_left_as_it_is,
    test_events_are_read_in_the_order_appended_one_line_each,
    test_last_event_missing_only_its_newline_is_kept,
    test_missing_retry_state_is_none_and_creates_nothing,
    test_pi_ticketflow_retry_state_loads_unchanged_and_untouched,
    test_reading_a_missing_journal_creates_nothing,
    test_reset_moves_the_record_aside_and_journals_it,
    test_save_refuses_to_overwrite_a_corrupt_record,
    test_save_then_load_round_trips_in_pi_ticketflows_format,
    test_saved_state_is_redacted,
    test_schema_error_names_the_value_it_got,
    test_secrets_in_events_are_redacted_before_they_are_kept,
    test_the_running_phase_is_the_last_started_of_that_attempt,
    test_torn_tail_is_cut_and_recorded_before_the_next_append,
    test_writes_in_a_batch_are_readable_at_once_and_kept,
)
from tf_fsm.conformance.store_views import (
    test_a_damaged_view_is_rebuilt_from_its_image_after_a_crash,
    test_a_journal_deleted_during_a_run_is_created_again,
    test_a_reset_retry_state_is_not_brought_back,
    test_a_view_is_journaled_before_it_is_written_and_redacted_in_both,
    test_after_a_clean_end_a_view_edited_since_is_trusted,
    test_only_the_kept_views_have_images,
    test_reads_see_appends_by_another_store_of_the_same_ticket,
    test_take_written_names_each_artifact_once_with_its_last_sha256,
    test_whole_views_are_left_alone_and_the_check_is_journaled,
)

__all__ = [
    "holders",
    "make",
    "raw",
    "root",
    "snapshot",
    "spec",
    "store",
    "test_a_bad_ticket_id_is_refused_before_anything_is_kept",
    "test_a_damaged_view_is_rebuilt_from_its_image_after_a_crash",
    "test_a_journal_deleted_during_a_run_is_created_again",
    "test_a_journal_that_is_only_a_torn_tail_is_repaired",
    "test_a_reset_retry_state_is_not_brought_back",
    "test_a_symlink_out_of_the_ticket_directory_is_refused",
    "test_a_symlink_that_stays_inside_the_ticket_directory_is_allowed",
    "test_a_view_is_journaled_before_it_is_written_and_redacted_in_both",
    "test_a_write_that_fails_midway_leaves_the_old_content_and_no_temp_file",
    "test_after_a_clean_end_a_view_edited_since_is_trusted",
    "test_an_agents_file_is_redacted_in_place_and_taken",
    "test_an_artifact_file_is_replaced_atomically",
    "test_an_artifact_is_replaced_and_left_alone_when_unchanged",
    "test_an_artifact_that_is_itself_a_symlink_out_is_refused",
    "test_another_tickets_state_or_event_is_refused",
    "test_append_refuses_to_cut_a_complete_but_invalid_last_line",
    "test_artifact_names_that_could_escape_or_clobber_are_refused",
    "test_artifacts_are_redacted_and_read_leniently",
    "test_artifacts_round_trip",
    "test_check_paths_refuses_links_out_and_a_linked_journal",
    "test_corrupt_middle_line_is_a_corrupt_state_error_and_is_not_touched",
    "test_corrupt_retry_state_raises_and_is_left_as_it_is",
    "test_events_are_read_in_the_order_appended_one_line_each",
    "test_last_event_missing_only_its_newline_is_kept",
    "test_missing_retry_state_is_none_and_creates_nothing",
    "test_only_the_kept_views_have_images",
    "test_pi_ticketflow_retry_state_loads_unchanged_and_untouched",
    "test_reading_a_missing_journal_creates_nothing",
    "test_reads_never_write",
    "test_reads_see_appends_by_another_store_of_the_same_ticket",
    "test_reset_moves_the_record_aside_and_journals_it",
    "test_save_refuses_to_overwrite_a_corrupt_record",
    "test_save_then_load_round_trips_in_pi_ticketflows_format",
    "test_saved_state_is_redacted",
    "test_schema_error_names_the_value_it_got",
    "test_secrets_in_events_are_redacted_before_they_are_kept",
    "test_take_written_names_each_artifact_once_with_its_last_sha256",
    "test_the_chain_context_is_the_artifact_of_that_name",
    "test_the_lock_is_exclusive_across_processes",
    "test_the_lock_is_free_once_the_holder_releases_it_or_is_sigkilled",
    "test_the_lock_is_not_reentrant_within_a_process",
    "test_the_lock_is_released_when_the_body_raises",
    "test_the_lock_survives_deletion_of_the_tickets_files",
    "test_the_running_phase_is_the_last_started_of_that_attempt",
    "test_torn_tail_is_cut_and_recorded_before_the_next_append",
    "test_whole_views_are_left_alone_and_the_check_is_journaled",
    "test_writes_in_a_batch_are_readable_at_once_and_kept",
]

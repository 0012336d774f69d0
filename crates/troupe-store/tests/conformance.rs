//! The conformance suite every store backend must pass: each test is written once, over
//! `Arc<dyn Backend>`, and instantiated below for SQLite (a fresh temporary file per
//! test) and PostgreSQL (a fresh schema per test, when `TROUPE_TEST_DATABASE_URL` names a
//! server).

mod conformance {
    pub mod backends;
    pub mod conversations;
    pub mod evidence;
    pub mod harness;
    pub mod memory;
    pub mod queue;
    pub mod runs;
    pub mod schedules;
    pub mod signals;
    pub mod work;
}

/// Generates one `#[tokio::test]` per listed suite function in each backend's module.
macro_rules! conformance_tests {
    ($($module:ident :: $test:ident),* $(,)?) => {
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    crate::conformance::backends::sqlite::run(crate::conformance::$module::$test).await;
                }
            )*
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    crate::conformance::backends::postgres::run(crate::conformance::$module::$test).await;
                }
            )*
        }
    };
}

conformance_tests! {
    runs::created_run_loads_back,
    runs::duplicate_run_id_is_refused,
    runs::runs_are_listed_newest_first_with_filters,
    runs::a_search_finds_part_of_a_name_or_a_model_or_an_ids_start,
    runs::runs_are_listed_as_records_without_their_conversation,
    runs::child_runs_are_listed_by_their_parent,
    runs::checkpoints_record_transitions_only_on_status_changes,
    runs::queued_run_is_enqueued_on_creation,
    runs::checkpoint_of_unknown_run_fails,
    runs::a_deferred_checkpoint_saves_and_orders_with_flushed_writes,
    runs::a_conversation_kept_apart_is_appended_and_loads_whole,
    runs::runs_spend_is_summed_by_agent_model_day_and_rollup,
    signals::signals_are_pending_until_consumed,
    signals::a_checkpoint_says_the_latest_signal,
    signals::concurrent_senders_get_gapless_numbers,
    signals::signal_to_unknown_run_fails,
    signals::no_signal_is_acknowledged_and_then_left_behind,
    memory::memories_are_found_by_their_words_within_their_namespace,
    evidence::evidence_reads_back_and_verifies,
    evidence::evidence_cannot_be_updated_or_deleted,
    evidence::stale_writer_gets_evidence_conflict,
    evidence::forged_row_fails_verification,
    evidence::a_cut_log_falls_short_of_its_head,
    evidence::one_append_moves_each_runs_head_to_its_last_entry,
    evidence::undecodable_row_is_a_decode_error,
    evidence::checkpoint_evidence_is_atomic_with_state,
    conversations::turns_from_two_runs_read_in_order,
    conversations::concurrent_appends_keep_batches_whole,
    conversations::messages_read_back_as_appended,
    queue::enqueue_claim_heartbeat_release,
    queue::claim_respects_availability_and_order,
    queue::enqueue_leaves_a_leased_run_with_its_holder,
    queue::lapsed_lease_is_taken_over_and_fenced,
    queue::acquire_takes_a_particular_run,
    queue::concurrent_claimers_never_share_a_run,
    queue::a_run_is_created_with_its_lease,
    queue::the_last_checkpoint_releases_the_lease,
    queue::a_fenced_checkpoint_that_keeps_the_status_checks_the_lease_and_signals,
    queue::concurrent_checkpoints_stand_or_fall_alone,
    schedules::schedules_are_put_listed_due_and_deleted,
    schedules::a_tick_fires_exactly_once_under_contention,
    schedules::a_wake_tick_signals_and_enqueues_the_run,
    work::work_items_are_enqueued_claimed_and_completed,
    work::work_claims_go_by_priority_then_age,
    work::work_claims_honour_tag_filters,
    work::failed_work_is_retried_until_its_last_attempt,
    work::lapsed_work_leases_return_the_item_or_fail_it,
    work::a_stale_work_holder_is_refused,
    work::concurrent_work_claimers_never_share_an_item,
}

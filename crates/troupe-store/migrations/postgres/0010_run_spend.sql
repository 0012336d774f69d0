-- troupe store, schema version 10 (PostgreSQL): what a run has spent, kept in its row beside
-- its state (`RunSpend`), written by its creation and its checkpoints: sums over many runs
-- (`spend_since`) read these columns, not each run's state. NULL: not kept (a run of an
-- older build), its record is read instead. Columns added without a default cost no
-- rewrite of the table.
ALTER TABLE runs ADD COLUMN spend_model TEXT;
ALTER TABLE runs ADD COLUMN spend_tokens BIGINT;
ALTER TABLE runs ADD COLUMN spend_cost_usd DOUBLE PRECISION;
ALTER TABLE runs ADD COLUMN spend_rollup BOOLEAN;

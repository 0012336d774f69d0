-- troupe store, schema version 9 (PostgreSQL): the listing indexes in ascending order.
-- Run ids and creation times increase, so a new run's keys come after every earlier run's
-- and its entries are appended at the index's end (a newest-first list reads it
-- backwards, as fast). In descending order each new run went before all the others.
DROP INDEX IF EXISTS runs_by_creation;
DROP INDEX IF EXISTS runs_by_status;
CREATE INDEX runs_by_creation ON runs (created_at, id);
CREATE INDEX runs_by_status ON runs (status, created_at, id);

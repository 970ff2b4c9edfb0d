-- Up to when a receive has counted lapsed leases out of a limit's holders
-- (docs/decisions.md#shared-limits): a lease that lapsed by then has lost
-- its unit, which may be another message's now, so a heartbeat (from a
-- process whose clock runs behind) may no longer extend it.
ALTER TABLE limits ADD COLUMN lapses_counted_until timestamptz;

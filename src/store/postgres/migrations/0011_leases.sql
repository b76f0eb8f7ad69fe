-- Leases (`Write::Lease`): which instance runs a piece of background work (a bank connection's
-- cut-off) until when, so that one instance at a time does. `until` is microseconds since the
-- epoch. Expand-only: older instances ignore the table.
CREATE TABLE leases (
    name   TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until  BIGINT NOT NULL
);
